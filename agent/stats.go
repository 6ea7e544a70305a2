package agent

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// minFreeMemoryInterval spaces the collections stats may ask for: each
// stops the process briefly, and a peer must not be able to keep it stopped.
const minFreeMemoryInterval = time.Second

func handleStats(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.Stats
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	stats := s.agent.Stats(m.FreeMemory)
	return &stats, nil
}

// Stats reports the process's and the engine's load (goroutines, sessions,
// memory); with freeMemory it first returns free memory to the system, at
// most once per minFreeMemoryInterval (the stats reply's shape is exactly
// the report's).
func (a *Agent) Stats(freeMemory bool) protocol.StatsReply {
	freed := false
	if freeMemory {
		freed = a.freeMemory()
	}
	engineGoroutines := 0
	for _, n := range a.Goroutines() {
		engineGoroutines += n
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a.mu.Lock()
	sessions := len(a.sessions)
	a.mu.Unlock()
	return protocol.StatsReply{
		Goroutines:        runtime.NumGoroutine(),
		EngineGoroutines:  engineGoroutines,
		Sessions:          sessions,
		HeapAllocBytes:    ms.HeapAlloc,
		HeapSysBytes:      ms.HeapSys,
		HeapReleasedBytes: ms.HeapReleased,
		SysBytes:          ms.Sys,
		NumGC:             ms.NumGC,
		MemoryFreed:       freed,
	}
}

// freeMemory collects and returns free memory to the OS, at most once per
// minFreeMemoryInterval; it reports whether it did.
func (a *Agent) freeMemory() bool {
	last := a.lastFreeMemory.Load()
	now := time.Now().UnixNano()
	if now-last < int64(minFreeMemoryInterval) || !a.lastFreeMemory.CompareAndSwap(last, now) {
		return false
	}
	// Two collections: the first moves pooled buffers (outbound blocks,
	// encoders) to the pools' victim caches, the second drops them, as two
	// ordinary cycles would.
	runtime.GC()
	debug.FreeOSMemory()
	return true
}

// memoryReleaseDelay lets a closed session's goroutines end and drop their
// buffers before the collection.
const memoryReleaseDelay = time.Second

// releaseMemorySoon returns the memory a session that hit its bounds made
// the agent hold, shortly after it closed. Without it an idle agent keeps
// that memory until the runtime's periodic collection (minutes): the pages
// are garbage, but nothing allocates to trigger a cycle.
func (a *Agent) releaseMemorySoon() {
	if !a.memoryReleasePending.CompareAndSwap(false, true) {
		return
	}
	started := a.sup.goCtx("memory release", func(ctx context.Context) {
		defer a.memoryReleasePending.Store(false)
		select {
		case <-ctx.Done():
		case <-time.After(memoryReleaseDelay):
			a.freeMemory()
		}
	})
	if !started {
		a.memoryReleasePending.Store(false)
	}
}
