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
// (Postgres). It is optional: the engine asks for it rather than knowing
// the backend's type.
type PoolStatsReporter interface {
	PoolStats() PoolStats
}

var _ PoolStatsReporter = (*Postgres)(nil)

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
