//go:build !race

package sysdb_test

// queuesRaceBuild: see sqlite_queues_race_test.go.
const queuesRaceBuild = false
