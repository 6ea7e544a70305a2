package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxDepth bounds how deeply maps and arrays nest in a frame, the envelope
// counting as one. Messages nest a few levels (envelope, body, history,
// step); payloads are opaque strings, so user data never nests here.
const MaxDepth = 32

var errTruncated = errors.New("the frame ends inside a value")

// checkWellFormed verifies that b is exactly one msgpack value, nested at
// most MaxDepth deep, whose every announced length fits in the bytes that
// follow it.
//
// The msgpack decoder recurses once per nesting level and preallocates
// what an array header announces (4 G elements in 5 bytes). This walk is
// iterative and allocation-free and runs first, so that neither a deep
// nesting nor a huge announced length in a small frame can exhaust the
// stack or the memory of the process decoding it.
func checkWellFormed(b []byte) error {
	_, err := checkBody(b)
	return err
}

// checkBody is checkWellFormed that also says whether b holds a float
// anywhere (an integer field may hold one: coerceIntegralFloats).
func checkBody(b []byte) (hasFloat bool, err error) {
	end, err := walkValue(b, 0, 1, &hasFloat)
	if err != nil {
		return false, err
	}
	if end < len(b) {
		return false, fmt.Errorf("%d trailing bytes after the value", len(b)-end)
	}
	return hasFloat, nil
}

// skipValue walks one value starting at b[i], counting the envelope's
// level as depth (1 for the envelope itself), and returns the offset just
// after it.
func skipValue(b []byte, i, depth int) (int, error) {
	return walkValue(b, i, depth, nil)
}

// walkValue is skipValue that sets *hasFloat when it meets a float (when
// hasFloat is not nil).
func walkValue(b []byte, i, depth int, hasFloat *bool) (int, error) {
	var stack [MaxDepth]int // values still due at each open level
	base := depth - 1
	depth = base
	need := 1 // values still due at the current level
	for {
		for need == 0 {
			if depth == base {
				return i, nil
			}
			depth--
			need = stack[depth]
		}
		if i >= len(b) {
			return 0, errTruncated
		}
		start := i
		c := b[i]
		i++
		need--

		var skip, elems uint64 // bytes to skip; values the container holds
		var err error
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		case c <= 0x8f: // fixmap
			elems = 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			elems = uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		default:
			switch c {
			case 0xc0, 0xc2, 0xc3: // nil, false, true
			case 0xc1:
				return 0, fmt.Errorf("byte 0xc1 at offset %d is not msgpack", start)
			case 0xc4, 0xd9: // bin 8, str 8
				skip, i, err = readLength(b, i, 1)
			case 0xc5, 0xda: // bin 16, str 16
				skip, i, err = readLength(b, i, 2)
			case 0xc6, 0xdb: // bin 32, str 32
				skip, i, err = readLength(b, i, 4)
			case 0xc7: // ext 8: length, type, data
				skip, i, err = readLength(b, i, 1)
				skip++
			case 0xc8: // ext 16
				skip, i, err = readLength(b, i, 2)
				skip++
			case 0xc9: // ext 32
				skip, i, err = readLength(b, i, 4)
				skip++
			case 0xca: // float 32
				skip = 4
				if hasFloat != nil {
					*hasFloat = true
				}
			case 0xcb: // float 64
				skip = 8
				if hasFloat != nil {
					*hasFloat = true
				}
			case 0xcc, 0xd0: // uint 8, int 8
				skip = 1
			case 0xcd, 0xd1:
				skip = 2
			case 0xce, 0xd2:
				skip = 4
			case 0xcf, 0xd3:
				skip = 8
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16: type, data
				skip = 1 + 1<<(c-0xd4)
			case 0xdc: // array 16
				elems, i, err = readLength(b, i, 2)
			case 0xdd: // array 32
				elems, i, err = readLength(b, i, 4)
			case 0xde: // map 16
				elems, i, err = readLength(b, i, 2)
				elems *= 2
			case 0xdf: // map 32
				elems, i, err = readLength(b, i, 4)
				elems *= 2
			}
		}
		if err != nil {
			return 0, err
		}
		if skip > uint64(len(b)-i) {
			return 0, errTruncated
		}
		i += int(skip)
		if elems == 0 {
			continue
		}
		// Every value takes at least one byte.
		if elems > uint64(len(b)-i) {
			return 0, fmt.Errorf("a container at offset %d announces %d values; %d bytes follow", start, elems, len(b)-i)
		}
		if depth == MaxDepth {
			return 0, fmt.Errorf("values nest deeper than %d levels", MaxDepth)
		}
		stack[depth] = need
		depth++
		need = int(elems)
	}
}

// readLength reads a big-endian length of size bytes at b[i:].
func readLength(b []byte, i, size int) (uint64, int, error) {
	if len(b)-i < size {
		return 0, i, errTruncated
	}
	switch size {
	case 1:
		return uint64(b[i]), i + 1, nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b[i:])), i + 2, nil
	default:
		return uint64(binary.BigEndian.Uint32(b[i:])), i + 4, nil
	}
}
