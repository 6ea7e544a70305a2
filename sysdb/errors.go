package sysdb

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// NotFoundError says a workflow id names no row.
type NotFoundError struct{ WorkflowID string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("workflow %s does not exist", e.WorkflowID)
}

// ConflictingWorkflowError says a workflow id is taken by a row that differs
// from the request in name, class, config or queue. Reason says how, in
// DBOS Python's words where DBOS has them.
type ConflictingWorkflowError struct {
	WorkflowID string
	Reason     string
}

func (e *ConflictingWorkflowError) Error() string {
	return fmt.Sprintf("workflow %s: %s", e.WorkflowID, e.Reason)
}

// WorkflowIDInUseError says an insert with RejectExisting found its id
// taken by a row another request made (DBOS's workflow_id_reuse_policy
// "reject"); Status and Name are the stored row's.
type WorkflowIDInUseError struct {
	WorkflowID string
	Status     string
	Name       string
}

func (e *WorkflowIDInUseError) Error() string {
	return fmt.Sprintf("workflow id %s is already in use by workflow %s with status %s", e.WorkflowID, e.Name, e.Status)
}

// DeduplicatedError says an active workflow of the queue already holds the
// deduplication id.
type DeduplicatedError struct {
	WorkflowID      string
	QueueName       string
	DeduplicationID string
}

func (e *DeduplicatedError) Error() string {
	return fmt.Sprintf("workflow %s: queue %s already has an active workflow with deduplication id %s",
		e.WorkflowID, e.QueueName, e.DeduplicationID)
}

// FencedError says the run presenting an owner token no longer owns the
// workflow: it was cancelled, recovered elsewhere or finished.
type FencedError struct{ WorkflowID string }

func (e *FencedError) Error() string {
	return fmt.Sprintf("workflow %s is no longer owned by this run", e.WorkflowID)
}

// UnexpectedStepError says a step id already holds a step of another name:
// the workflow's code is not deterministic.
type UnexpectedStepError struct {
	WorkflowID string
	FunctionID int
	Recorded   string
	Attempted  string
}

func (e *UnexpectedStepError) Error() string {
	return fmt.Sprintf("workflow %s step %d: recorded step is %q but this run attempted %q (non-deterministic workflow)",
		e.WorkflowID, e.FunctionID, e.Recorded, e.Attempted)
}

// StepConflictError says a step id already holds a record of the same name
// with other content.
type StepConflictError struct {
	WorkflowID string
	FunctionID int
}

func (e *StepConflictError) Error() string {
	return fmt.Sprintf("workflow %s step %d was already recorded with a different outcome", e.WorkflowID, e.FunctionID)
}

// ConfigError is bad configuration: an unparsable URL and the like.
type ConfigError struct {
	Reason string
	Err    error
}

func (e *ConfigError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// IsConnectionError reports whether err means the database could not be
// reached or the connection broke, as opposed to the server rejecting the
// statement: only these are worth retrying without knowing the statement.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, cannot connect now
			return true
		case pgErr.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	if errors.Is(err, pgx.ErrTxClosed) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "broken pipe") || strings.Contains(msg, "unexpected EOF")
}

var passwordInText = regexp.MustCompile(`(?i)(password=)\S+|(://[^:/@\s]*:)[^@\s]*@`)

// Redact removes passwords from text that may carry a connection string.
func Redact(text string) string {
	return passwordInText.ReplaceAllStringFunc(text, func(m string) string {
		if strings.HasPrefix(strings.ToLower(m), "password=") {
			return "password=xxxxx"
		}
		i := strings.LastIndex(m[:len(m)-1], ":")
		return m[:i+1] + "xxxxx@"
	})
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr keeps err's chain for errors.As but never prints a password.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: Redact(err.Error()), err: err}
}

// describeTarget names a database for messages without its password.
func describeTarget(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// UnreachableError says the database server could not be reached (refused,
// unknown host, authentication failure, ...).
type UnreachableError struct {
	Target string // user@host:port/database, never a password
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the system database %s: %s", e.Target, condense(Redact(e.Err.Error())))
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// condense turns pgx's one-line-per-address connect errors into one line
// without repeats.
func condense(msg string) string {
	var parts []string
	seen := map[string]bool{}
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || seen[line] {
			continue
		}
		seen[line] = true
		parts = append(parts, line)
	}
	return strings.Join(parts, " ")
}
