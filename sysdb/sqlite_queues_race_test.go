//go:build race

package sysdb_test

// queuesRaceBuild: the race detector slows the pure-Go SQLite some twenty
// times, so the large-backlog test is left to ordinary builds.
const queuesRaceBuild = true
