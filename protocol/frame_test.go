package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func frameOf(body []byte) []byte { return AppendFrame(nil, body) }

func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestFrameReaderCap(t *testing.T) {
	t.Parallel()
	const limit = 10

	t.Run("a frame of exactly the cap is read", func(t *testing.T) {
		t.Parallel()
		body := []byte("0123456789")
		fr := NewFrameReader(bytes.NewReader(frameOf(body)), limit)
		got, err := fr.Next()
		require.NoError(t, err)
		require.Equal(t, body, got)
		_, err = fr.Next()
		require.ErrorIs(t, err, io.EOF)
	})

	t.Run("one byte over the cap is refused before its body is read", func(t *testing.T) {
		t.Parallel()
		r := bytes.NewReader(frameOf([]byte("0123456789A")))
		fr := NewFrameReader(r, limit)
		_, err := fr.Next()
		require.ErrorIs(t, err, ErrFrameTooLarge)
		require.Contains(t, err.Error(), "11 bytes announced, limit 10")
		require.Equal(t, 11, r.Len(), "the body was not consumed")
	})

	t.Run("the largest announced length is refused without allocating", func(t *testing.T) {
		t.Parallel()
		fr := NewFrameReader(bytes.NewReader(header(0xffffffff)), 0)
		_, err := fr.Next()
		require.ErrorIs(t, err, ErrFrameTooLarge)
		require.Nil(t, fr.buf)
	})

	t.Run("SetMaxSize changes the cap between frames", func(t *testing.T) {
		t.Parallel()
		stream := append(frameOf([]byte("12345")), frameOf([]byte("12345"))...)
		fr := NewFrameReader(bytes.NewReader(stream), limit)
		_, err := fr.Next()
		require.NoError(t, err)
		fr.SetMaxSize(4)
		_, err = fr.Next()
		require.ErrorIs(t, err, ErrFrameTooLarge)
	})

	t.Run("a cap of zero or less means the default", func(t *testing.T) {
		t.Parallel()
		for _, n := range []int{0, -1} {
			fr := NewFrameReader(bytes.NewReader(nil), n)
			require.Equal(t, DefaultMaxFrameSize, fr.max)
			fr.SetMaxSize(n)
			require.Equal(t, DefaultMaxFrameSize, fr.max)
		}
	})
}

func TestFrameReaderEndOfStream(t *testing.T) {
	t.Parallel()
	one := frameOf([]byte("hello"))
	for _, tc := range []struct {
		name   string
		stream []byte
		frames int
		err    error
	}{
		{"empty stream: clean EOF", nil, 0, io.EOF},
		{"after a whole frame: clean EOF", one, 1, io.EOF},
		{"inside the length prefix", one[:2], 0, io.ErrUnexpectedEOF},
		{"after the length prefix", one[:4], 0, io.ErrUnexpectedEOF},
		{"inside the body", one[:6], 0, io.ErrUnexpectedEOF},
		{"inside the second frame", append(append([]byte{}, one...), one[:7]...), 1, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, r := range []io.Reader{bytes.NewReader(tc.stream), iotest.OneByteReader(bytes.NewReader(tc.stream))} {
				fr := NewFrameReader(r, 100)
				for i := 0; i < tc.frames; i++ {
					got, err := fr.Next()
					require.NoError(t, err)
					require.Equal(t, "hello", string(got))
				}
				_, err := fr.Next()
				require.Equal(t, tc.err, err, "exactly %v, unwrapped", tc.err)
			}
		})
	}

	t.Run("other read errors pass through", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		fr := NewFrameReader(io.MultiReader(bytes.NewReader(one[:6]), iotest.ErrReader(boom)), 100)
		_, err := fr.Next()
		require.ErrorIs(t, err, boom)
	})
}

func TestFrameReaderEmptyFrame(t *testing.T) {
	t.Parallel()
	fr := NewFrameReader(bytes.NewReader(append(frameOf(nil), frameOf([]byte("x"))...)), 10)
	got, err := fr.Next()
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = fr.Next()
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
}

func TestFrameReaderManyFramesInPieces(t *testing.T) {
	t.Parallel()
	var stream []byte
	var bodies [][]byte
	for i := 0; i < 40; i++ {
		body := bytes.Repeat([]byte{byte('a' + i%26)}, i*i*7)
		bodies = append(bodies, body)
		stream = append(stream, frameOf(body)...)
	}
	for _, r := range []io.Reader{
		bytes.NewReader(stream),
		iotest.OneByteReader(bytes.NewReader(stream)),
		iotest.HalfReader(bytes.NewReader(stream)),
	} {
		fr := NewFrameReader(r, 1<<20)
		fr.chunk = 16 // grow in many steps
		for i, want := range bodies {
			got, err := fr.Next()
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "frame %d", i)
		}
		_, err := fr.Next()
		require.ErrorIs(t, err, io.EOF)
	}
}

// A large frame is read whole, but its buffer is not kept for the rest of
// the connection; small frames reuse one buffer.
func TestFrameReaderDoesNotRetainHugeBuffer(t *testing.T) {
	t.Parallel()
	huge := bytes.Repeat([]byte("z"), 3<<20)
	small := []byte("small")
	stream := append(frameOf(small), frameOf(huge)...)
	stream = append(stream, frameOf(small)...)
	fr := NewFrameReader(bytes.NewReader(stream), 4<<20)

	got, err := fr.Next()
	require.NoError(t, err)
	require.Equal(t, small, got)

	got, err = fr.Next()
	require.NoError(t, err)
	require.Equal(t, huge, got, "the caller gets the whole frame")
	require.LessOrEqual(t, cap(fr.buf), maxRetainedBuffer, "the reader let go of the large buffer")

	got, err = fr.Next()
	require.NoError(t, err)
	require.Equal(t, small, got)
	require.LessOrEqual(t, cap(fr.buf), maxRetainedBuffer)
}

func TestFrameReaderReusesItsBuffer(t *testing.T) {
	frame := frameOf(bytes.Repeat([]byte("y"), 1000))
	r := bytes.NewReader(frame)
	fr := NewFrameReader(r, 0)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(frame)
		if _, err := fr.Next(); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// A peer that announces a frame of the maximum size and sends nothing makes
// the reader allocate a first chunk, not the announced size.
func TestFrameReaderGrowsAsBytesArrive(t *testing.T) {
	stream := append(header(DefaultMaxFrameSize), "only this"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fr := NewFrameReader(bytes.NewReader(stream), DefaultMaxFrameSize)
	_, err := fr.Next()
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20),
		"a 16 MiB announcement with 9 bytes behind it allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
}

func TestAppendFrame(t *testing.T) {
	t.Parallel()
	require.Equal(t, []byte{0, 0, 0, 0}, AppendFrame(nil, nil))
	require.Equal(t, []byte{'x', 0, 0, 0, 3, 'a', 'b', 'c'}, AppendFrame([]byte("x"), []byte("abc")))
	big := make([]byte, 0x010203)
	require.Equal(t, []byte{0, 1, 2, 3}, AppendFrame(nil, big)[:4])
}
