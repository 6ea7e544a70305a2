package sysdb

import (
	"errors"
	"time"
)

// TEMPORARY while the SQLite backend is written: each group below is
// deleted as its file implements it, and this file with the last.
var errSQLiteTODO = errors.New("not yet implemented on SQLite")

var _ = time.Second

// ---- group B: workflows and steps (sqlite_workflows.go) ----

// ---- end of group B ----

// (separator)

// (separator)

// ---- group D: communication (sqlite_communication.go) ----

// ---- end of group D ----

// (separator)
