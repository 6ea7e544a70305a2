package agent

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// minFreeMemoryInterval spaces the collections stats may ask for: each
// stops the process briefly, and a peer must not be able to keep it stopped.
const minFreeMemoryInterval = time.Second

func handleStats(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	a := s.agent
	var m protocol.Stats
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	freed := false
	if m.FreeMemory {
		last := a.lastFreeMemory.Load()
		now := time.Now().UnixNano()
		if now-last >= int64(minFreeMemoryInterval) && a.lastFreeMemory.CompareAndSwap(last, now) {
			// Two collections: the first moves pooled buffers (outbound
			// blocks, encoders) to the pools' victim caches, the second
			// drops them, as two ordinary cycles would.
			runtime.GC()
			debug.FreeOSMemory()
			freed = true
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a.mu.Lock()
	sessions := len(a.sessions)
	a.mu.Unlock()
	return &protocol.StatsReply{
		Goroutines:        runtime.NumGoroutine(),
		Sessions:          sessions,
		HeapAllocBytes:    ms.HeapAlloc,
		HeapSysBytes:      ms.HeapSys,
		HeapReleasedBytes: ms.HeapReleased,
		SysBytes:          ms.Sys,
		NumGC:             ms.NumGC,
		MemoryFreed:       freed,
	}, nil
}
