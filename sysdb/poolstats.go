package sysdb

import "time"

// PoolStats is a connection pool's use, for operators' metrics.
type PoolStats struct {
	MaxConns      int32
	TotalConns    int32
	IdleConns     int32
	AcquiredConns int32
	// AcquireCount, EmptyAcquireCount (acquires that had to wait for a
	// connection) and CanceledAcquireCount count since the pool opened;
	// AcquireDuration is the total time acquires took.
	AcquireCount         int64
	EmptyAcquireCount    int64
	CanceledAcquireCount int64
	AcquireDuration      time.Duration
	// Retries counts operations repeated after a connection failure.
	Retries uint64
}

// PoolStatsReporter is implemented by backends that hold a connection pool
// (Postgres's pgxpool; SQLite's writer and readers). It is optional: the
// engine asks for it rather than knowing the backend's type.
type PoolStatsReporter interface {
	PoolStats() PoolStats
}

var (
	_ PoolStatsReporter = (*Postgres)(nil)
	_ PoolStatsReporter = (*SQLite)(nil)
)

// PoolStats implements PoolStatsReporter from pgxpool's counters.
func (p *Postgres) PoolStats() PoolStats {
	s := p.pool.Stat()
	return PoolStats{
		MaxConns:             s.MaxConns(),
		TotalConns:           s.TotalConns(),
		IdleConns:            s.IdleConns(),
		AcquiredConns:        s.AcquiredConns(),
		AcquireCount:         s.AcquireCount(),
		EmptyAcquireCount:    s.EmptyAcquireCount(),
		CanceledAcquireCount: s.CanceledAcquireCount(),
		AcquireDuration:      s.AcquireDuration(),
		Retries:              p.retries.Load(),
	}
}

// PoolStats implements PoolStatsReporter over the writer connection and the
// readers together. database/sql counts only the acquires that waited and
// how long they waited, so AcquireDuration is waiting time (an acquire that
// finds a connection idle takes none), AcquireCount is counted here, one a
// transaction begun, and canceled acquires are not known (0).
func (s *SQLite) PoolStats() PoolStats {
	w, r := s.w.Stats(), s.r.Stats()
	return PoolStats{
		MaxConns:          int32(1 + s.readers),
		TotalConns:        int32(w.OpenConnections + r.OpenConnections),
		IdleConns:         int32(w.Idle + r.Idle),
		AcquiredConns:     int32(w.InUse + r.InUse),
		AcquireCount:      s.acquires.Load(),
		EmptyAcquireCount: w.WaitCount + r.WaitCount,
		AcquireDuration:   w.WaitDuration + r.WaitDuration,
		Retries:           s.retries.Load(),
	}
}
