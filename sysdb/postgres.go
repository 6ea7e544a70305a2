package sysdb

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

//go:embed postgres_queries.sql
var postgresQueriesSQL string

// PostgresOptions configures a Postgres system database.
type PostgresOptions struct {
	// Schema holds the system tables; empty means DefaultSchema.
	Schema string
	// MaxConns caps the pool; 0 means pgx's default (4 per CPU, at least 4).
	MaxConns int32
	// Logger receives warnings about retried connection failures; nil
	// means none.
	Logger *zap.Logger
	// SkipMigrations opens a database someone else migrated; the schema
	// version is still checked.
	SkipMigrations bool
	// ApplicationName tags the pool's connections (pg_stat_activity).
	ConnectionLabel string
	// RetryFor bounds how long an operation retries connection failures
	// before giving up; 0 means one minute, RetryUntilCancelled (any
	// negative value) means until the operation's context ends, which is
	// what a long-running agent wants: an outage of any length is waited
	// out, never turned into lost or failed work. Migrations on open use
	// the same bound.
	RetryFor time.Duration
	// Password, when set, replaces the URL's, so that it can come from a
	// file or the environment instead of a command line. Unset, the URL's
	// password is used, else libpq's PGPASSWORD and PGPASSFILE (pgx reads
	// them).
	Password string
}

// RetryUntilCancelled is a RetryFor that never gives up on its own.
const RetryUntilCancelled time.Duration = -1

// retryLogEvery bounds how often one retried operation logs that it is
// still retrying, so that a long outage is visible but not a flood.
const retryLogEvery = 30 * time.Second

// Postgres is the SystemDatabase on PostgreSQL through pgx/v5.
type Postgres struct {
	pool     *pgxpool.Pool
	schema   string
	q        map[string]string
	log      *zap.Logger
	retryFor time.Duration
	target   string // user@host:port/database for messages
	notes    *notifier
	// retries counts operations repeated after a connection failure
	// (PoolStats).
	retries atomic.Uint64
}

var _ SystemDatabase = (*Postgres)(nil)

// OpenPostgres migrates (unless told not to) and connects to the system
// database at databaseURL.
func OpenPostgres(ctx context.Context, databaseURL string, opts PostgresOptions) (*Postgres, error) {
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, &ConfigError{Reason: "invalid database URL", Err: redactErr(err)}
	}
	if opts.Password != "" {
		cfg.ConnConfig.Password = opts.Password
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	label := opts.ConnectionLabel
	if label == "" {
		label = "dbos-agent"
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = label
	// The fixed statements are planned once per connection. Postgres's
	// default (auto) plans a statement afresh at every execution while a
	// plan for its actual values looks cheaper than the generic one, which
	// for the batches' unnest of a few rows is always: measured at 64
	// workflows in flight, that planning was ~230 µs of a step batch's
	// bind and ~420 µs of a finish batch's, about 40% of the Postgres CPU
	// per step. Listings, whose best plan depends on the values (a rare
	// status has its own partial index), are planned with their values
	// (WorkflowList).
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"

	if !opts.SkipMigrations {
		if _, err := Migrate(ctx, databaseURL, MigrateOptions{Schema: schema, Logger: log, Password: opts.Password, RetryFor: opts.RetryFor}); err != nil {
			return nil, err
		}
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool for %s: %w", describeTarget(cfg.ConnConfig), redactErr(err))
	}
	p := &Postgres{
		pool:     pool,
		schema:   schema,
		q:        renderQueries(postgresQueriesSQL, pgx.Identifier{schema}.Sanitize()),
		log:      log,
		retryFor: opts.RetryFor,
		target:   describeTarget(cfg.ConnConfig),
		notes:    newNotifier(pool, log),
	}
	if p.retryFor == 0 {
		p.retryFor = time.Minute
	}
	if opts.SkipMigrations {
		var version int64
		err := p.retry(ctx, "check schema version", func(ctx context.Context) error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			version, err = schemaVersion(ctx, conn.Conn(), schema)
			return err
		})
		if err != nil {
			p.notes.close()
			pool.Close()
			return nil, err
		}
		if version < LatestSchemaVersion {
			p.notes.close()
			pool.Close()
			return nil, fmt.Errorf("system database schema %q is at version %d, this agent needs %d: run `dbos-agent migrate`",
				schema, version, LatestSchemaVersion)
		}
	}
	return p, nil
}

// Schema is the schema holding the system tables.
func (p *Postgres) Schema() string { return p.schema }

// Describe implements Backend: user@host:port/database, schema.
func (p *Postgres) Describe() string { return p.target + ", schema " + p.schema }

// Close releases the pool.
func (p *Postgres) Close() {
	p.notes.close()
	p.pool.Close()
}

// renderQueries splits the named statements of a queries file and fills in
// the schema. A statement may include a named fragment with {{> Name}}, so
// that CTEs several statements share are written once.
func renderQueries(text, quotedSchema string) map[string]string {
	out := map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			out[name] = strings.ReplaceAll(strings.TrimSpace(body.String()), "{{schema}}", quotedSchema)
		}
		body.Reset()
	}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- name: "); ok {
			flush()
			name = strings.TrimSpace(rest)
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	for name, q := range out {
		for strings.Contains(q, "{{> ") {
			start := strings.Index(q, "{{> ")
			end := strings.Index(q[start:], "}}")
			if end < 0 {
				panic("sysdb: unterminated fragment in query " + name)
			}
			fragment, ok := out[strings.TrimSpace(q[start+4:start+end])]
			if !ok {
				panic("sysdb: query " + name + " includes an unknown fragment " + q[start:start+end+2])
			}
			q = q[:start] + fragment + q[start+end+2:]
		}
		out[name] = q
	}
	return out
}

func (p *Postgres) sql(name string) string {
	s, ok := p.q[name]
	if !ok {
		panic("sysdb: no query named " + name)
	}
	return s
}

func (p *Postgres) table(name string) string {
	return pgx.Identifier{p.schema, name}.Sanitize()
}

// retry runs op until it succeeds, fails with an error that is not a
// connection failure, or the retry window (or ctx) ends. Every operation
// passed here is safe to repeat: inserts are idempotent on their keys, and a
// write whose commit acknowledgement was lost is recognised on the retry.
func (p *Postgres) retry(ctx context.Context, what string, op func(context.Context) error) error {
	deadline := time.Now().Add(p.retryFor)
	backoff := 50 * time.Millisecond
	var lastLog time.Time
	for {
		err := op(ctx)
		var final *nonRetryable
		if err == nil || errors.As(err, &final) || !IsConnectionError(err) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("%s: %w", what, redactErr(err))
			}
			return nil
		}
		if p.retryFor > 0 && time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("%s (gave up after %s): %w", what, p.retryFor, &UnreachableError{Target: p.target, Err: err})
		}
		if time.Since(lastLog) >= retryLogEvery {
			lastLog = time.Now()
			p.log.Warn("system database connection failed, retrying",
				zap.String("operation", what), zap.Duration("backoff", backoff), zap.Error(redactErr(err)))
		}
		p.retries.Add(1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, errors.Join(ctx.Err(), redactErr(err)))
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// WorkflowInsert implements SystemDatabase.
func (p *Postgres) WorkflowInsert(ctx context.Context, in WorkflowInsertParams) (WorkflowInsertResult, error) {
	if in.ID == "" || in.Name == "" {
		return WorkflowInsertResult{}, errors.New("workflow insert: id and name are required")
	}
	switch in.Status {
	case StatusPending, StatusEnqueued, StatusDelayed:
	default:
		return WorkflowInsertResult{}, fmt.Errorf("workflow insert: status must be PENDING, ENQUEUED or DELAYED, not %q", in.Status)
	}
	if in.CreatorXID == "" {
		return WorkflowInsertResult{}, errors.New("workflow insert: a creator token is required")
	}
	if parent := in.ParentStep; parent != nil {
		if err := checkCaller(parent); err != nil {
			return WorkflowInsertResult{}, fmt.Errorf("workflow insert %s: parent step: %w", in.ID, err)
		}
		if in.ParentWorkflowID == nil || *in.ParentWorkflowID != parent.WorkflowID {
			return WorkflowInsertResult{}, fmt.Errorf("workflow insert %s: the parent step is of %s but the parent workflow is %q",
				in.ID, parent.WorkflowID, deref(in.ParentWorkflowID))
		}
	}
	var res WorkflowInsertResult
	err := p.retry(ctx, "insert workflow "+in.ID, func(ctx context.Context) error {
		if in.ParentStep == nil {
			return p.sendInsert(ctx, p.pool, in, &res)
		}
		// The parent's fence and step are checked here, after the
		// statements ran: a refusal must roll the child back, so the batch
		// runs in a transaction of its own.
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error { return p.sendInsert(ctx, tx, in, &res) })
	})
	if err != nil {
		return WorkflowInsertResult{}, err
	}
	if res.Created && res.Status == StatusEnqueued && res.QueueName != nil {
		p.notes.add(ChannelQueue, *res.QueueName)
	}
	return res, nil
}

// sendInsert runs WorkflowInsert's batch on q (the pool, or a transaction
// the insert is part of) and reads it into res.
func (p *Postgres) sendInsert(ctx context.Context, q interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, in WorkflowInsertParams, res *WorkflowInsertResult) error {
	br := q.SendBatch(ctx, p.insertBatch(in))
	err := p.readInsertBatch(br, in, res)
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return err
}

// insertBatch is WorkflowInsert's batch: one statement for the row with its
// inputs; for a child, in one round trip with the parent's lock (taken
// first, as every fenced write takes it) and the parent's step.
func (p *Postgres) insertBatch(in WorkflowInsertParams) *pgx.Batch {
	var b pgx.Batch
	if in.ParentStep != nil {
		b.Queue(p.sql("WorkflowOwnerLock"), in.ParentStep.WorkflowID)
	}
	b.Queue(p.sql("WorkflowInsert"),
		in.ID, in.Status, in.Name, in.ClassName, in.ConfigName,
		in.QueueName, in.QueuePartitionKey, in.DeduplicationID, in.Priority,
		in.AuthenticatedUser, in.AssumedRole, in.AuthenticatedRoles,
		in.ExecutorID, in.ApplicationVersion, in.ApplicationID, in.ApplicationName,
		in.TimeoutMS, in.DeadlineEpochMS, in.DelayUntilEpochMS,
		in.ParentWorkflowID, in.Attributes, in.ScheduleName,
		in.DebounceDeadline, in.IsDebounced, in.Serialization,
		in.CreatorXID, in.Inputs,
	)
	if c := in.ParentStep; c != nil {
		b.Queue(p.sql("ChildStepRecord"), c.WorkflowID, c.OwnerXID, c.FunctionID, in.Name, in.ID, c.ApplicationName)
	}
	return &b
}

// readInsertBatch reads WorkflowInsert's batch: the parent's fence, the
// stored row, and the parent's step pointing at it.
func (p *Postgres) readInsertBatch(br pgx.BatchResults, in WorkflowInsertParams, res *WorkflowInsertResult) error {
	if in.ParentStep != nil {
		var owner *string
		lockErr := br.QueryRow().Scan(&owner)
		if err := ownerError(*in.ParentStep, lockErr, owner); err != nil {
			return err
		}
	}
	var className, configName, creator *string
	err := br.QueryRow().Scan(&res.Status, &res.Name, &className, &configName, &res.QueueName, &res.QueuePartitionKey,
		&res.TimeoutMS, &res.DeadlineEpochMS, &res.OwnerXID, &creator)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return &DeduplicatedError{WorkflowID: in.ID, QueueName: deref(in.QueueName), DeduplicationID: deref(in.DeduplicationID)}
		}
		return err
	}
	res.Created = creator != nil && *creator == in.CreatorXID
	if !res.Created && in.RejectExisting {
		// Before the parent's step is read: the error rolls the batch's
		// transaction back, so no step points at the workflow in use.
		return &WorkflowIDInUseError{WorkflowID: in.ID, Status: res.Status, Name: res.Name}
	}
	if !res.Created {
		if reason := insertConflict(in, *res, className, configName); reason != "" {
			return &ConflictingWorkflowError{WorkflowID: in.ID, Reason: reason}
		}
	}
	if c := in.ParentStep; c != nil {
		var inserted bool
		var name, child *string
		if err := br.QueryRow().Scan(&inserted, &name, &child); err != nil {
			return err
		}
		if !inserted && deref(child) != in.ID {
			recorded := deref(name)
			if child != nil {
				recorded += " (child " + *child + ")"
			}
			return &UnexpectedStepError{WorkflowID: c.WorkflowID, FunctionID: c.FunctionID, Recorded: recorded, Attempted: in.Name + " (child " + in.ID + ")"}
		}
	}
	return nil
}

// insertConflict says how an existing row differs from an insert request in
// what identifies the workflow's code, or "" when it does not. The words are
// DBOS Python's (its callers match on them); a different queue, which DBOS
// only warns about, is refused here, so that a start never silently lands
// on another queue than the one asked for.
func insertConflict(in WorkflowInsertParams, stored WorkflowInsertResult, className, configName *string) string {
	switch {
	case stored.Name != in.Name:
		return fmt.Sprintf("Workflow already exists with a different function name: %s, but the provided function name is: %s", stored.Name, in.Name)
	case in.ClassName != nil && deref(className) != *in.ClassName:
		return fmt.Sprintf("Workflow already exists with a different class name: %s, but the provided class name is: %s", deref(className), *in.ClassName)
	case in.ConfigName != nil && deref(configName) != *in.ConfigName:
		return fmt.Sprintf("Workflow already exists with a different config name: %s, but the provided config name is: %s", deref(configName), *in.ConfigName)
	case in.QueueName != nil && stored.QueueName != nil && *stored.QueueName != *in.QueueName:
		return fmt.Sprintf("Workflow already exists in queue: %s, but the provided queue name is: %s", *stored.QueueName, *in.QueueName)
	}
	return ""
}

// workflowColumns are read for every listed workflow, in scanWorkflow's order.
var workflowColumns = []string{
	"w.workflow_uuid", "w.status", "w.name", "w.class_name", "w.config_name",
	"w.queue_name", "w.queue_partition_key", "w.deduplication_id", "w.priority",
	"w.authenticated_user", "w.assumed_role", "w.authenticated_roles",
	"w.executor_id", "w.application_version", "w.application_id", "w.application_name",
	"w.created_at", "w.updated_at", "w.started_at_epoch_ms", "w.completed_at",
	"w.recovery_attempts", "w.workflow_timeout_ms", "w.workflow_deadline_epoch_ms", "w.delay_until_epoch_ms",
	"w.forked_from", "w.was_forked_from", "w.parent_workflow_id", "w.owner_xid", "w.creator_xid",
	"w.rate_limited", "w.attributes::text", "w.schedule_name", "w.debounce_deadline_epoch_ms", "w.is_debounced",
	"w.serialization",
}

func (p *Postgres) selectWorkflows(loadInputs, loadOutputs bool) string {
	cols := append([]string(nil), workflowColumns...)
	from := p.table("workflow_status") + " AS w"
	// COALESCE: rows written before the payload tables existed keep their
	// payloads on workflow_status.
	if loadInputs {
		cols = append(cols, "COALESCE(i.inputs, w.inputs)")
		from += " LEFT JOIN " + p.table("workflow_input") + " AS i ON i.workflow_uuid = w.workflow_uuid"
	}
	if loadOutputs {
		cols = append(cols, "COALESCE(o.output, w.output)", "COALESCE(o.error, w.error)")
		from += " LEFT JOIN " + p.table("workflow_output") + " AS o ON o.workflow_uuid = w.workflow_uuid"
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + from
}

func scanWorkflow(row pgx.Row, loadInputs, loadOutputs bool) (Workflow, error) {
	var w Workflow
	var name *string
	dest := []any{
		&w.ID, &w.Status, &name, &w.ClassName, &w.ConfigName,
		&w.QueueName, &w.QueuePartitionKey, &w.DeduplicationID, &w.Priority,
		&w.AuthenticatedUser, &w.AssumedRole, &w.AuthenticatedRoles,
		&w.ExecutorID, &w.ApplicationVersion, &w.ApplicationID, &w.ApplicationName,
		&w.CreatedAt, &w.UpdatedAt, &w.StartedAt, &w.CompletedAt,
		&w.RecoveryAttempts, &w.TimeoutMS, &w.DeadlineEpochMS, &w.DelayUntilEpochMS,
		&w.ForkedFrom, &w.WasForkedFrom, &w.ParentWorkflowID, &w.OwnerXID, &w.CreatorXID,
		&w.RateLimited, &w.Attributes, &w.ScheduleName, &w.DebounceDeadline, &w.IsDebounced,
		&w.Serialization,
	}
	var recoveryAttempts *int64
	dest[20] = &recoveryAttempts
	var status *string
	dest[1] = &status
	if loadInputs {
		dest = append(dest, &w.Inputs)
	}
	if loadOutputs {
		dest = append(dest, &w.Output, &w.Error)
	}
	if err := row.Scan(dest...); err != nil {
		return Workflow{}, err
	}
	w.Name = deref(name)
	w.Status = deref(status)
	if recoveryAttempts != nil {
		w.RecoveryAttempts = *recoveryAttempts
	}
	w.PayloadsLoaded = loadInputs && loadOutputs
	return w, nil
}

// WorkflowGet implements SystemDatabase.
func (p *Postgres) WorkflowGet(ctx context.Context, workflowID string) (Workflow, error) {
	var w Workflow
	err := p.retry(ctx, "get workflow "+workflowID, func(ctx context.Context) error {
		var err error
		w, err = scanWorkflow(p.pool.QueryRow(ctx, p.selectWorkflows(true, true)+" WHERE w.workflow_uuid = $1", workflowID), true, true)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Workflow{}, &NotFoundError{WorkflowID: workflowID}
	}
	return w, err
}

// WorkflowList implements SystemDatabase.
func (p *Postgres) WorkflowList(ctx context.Context, in WorkflowListParams) ([]Workflow, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	anyOf := func(column string, values []string) {
		if len(values) > 0 {
			where = append(where, column+" = ANY("+arg(values)+")")
		}
	}
	anyOf("w.workflow_uuid", in.WorkflowIDs)
	anyOf("w.status", in.Statuses)
	anyOf("w.name", in.Names)
	anyOf("w.queue_name", in.QueueNames)
	anyOf("w.executor_id", in.ExecutorIDs)
	anyOf("w.application_version", in.ApplicationVersion)
	anyOf("w.authenticated_user", in.AuthenticatedUsers)
	anyOf("w.parent_workflow_id", in.ParentWorkflowIDs)
	anyOf("w.forked_from", in.ForkedFrom)
	anyOf("w.deduplication_id", in.DeduplicationIDs)
	anyOf("w.schedule_name", in.ScheduleNames)
	if len(in.ApplicationNames) > 0 {
		where = append(where, "(w.application_name = ANY("+arg(in.ApplicationNames)+") OR w.application_name IS NULL)")
	}
	if len(in.IDPrefixes) > 0 {
		patterns := make([]string, len(in.IDPrefixes))
		for i, prefix := range in.IDPrefixes {
			patterns[i] = escapeLike(prefix) + "%"
		}
		where = append(where, "w.workflow_uuid LIKE ANY("+arg(patterns)+")")
	}
	if in.QueuesOnly {
		where = append(where, "w.queue_name IS NOT NULL")
		if len(in.Statuses) == 0 {
			// As DBOS lists queued workflows: those still waiting or running,
			// unless statuses are asked for.
			where = append(where, "w.status IN ('DELAYED', 'ENQUEUED', 'PENDING')")
		}
	}
	bound := func(column, op string, v *int64) {
		if v != nil {
			where = append(where, column+" "+op+" "+arg(*v))
		}
	}
	bound("w.created_at", ">=", in.CreatedAfter)
	bound("w.created_at", "<=", in.CreatedBefore)
	bound("w.completed_at", ">=", in.CompletedAfter)
	bound("w.completed_at", "<=", in.CompletedBefore)
	bound("w.started_at_epoch_ms", ">=", in.StartedAfter)
	bound("w.started_at_epoch_ms", "<=", in.StartedBefore)
	isNull := func(column string, notNull *bool) {
		if notNull == nil {
			return
		}
		if *notNull {
			where = append(where, column+" IS NOT NULL")
		} else {
			where = append(where, column+" IS NULL")
		}
	}
	isNull("w.parent_workflow_id", in.HasParent)
	isNull("w.forked_from", in.IsFork)
	if in.WasForkedFrom != nil {
		where = append(where, "w.was_forked_from = "+arg(*in.WasForkedFrom))
	}
	if in.Attributes != nil {
		if !isJSONObject(*in.Attributes) {
			return nil, fmt.Errorf("list workflows: attributes filter is not a JSON object: %s", strconv.Quote(*in.Attributes))
		}
		// Served by the partial GIN index on attributes (a bitmap index scan:
		// @> is strict, so the planner proves the index's IS NOT NULL).
		where = append(where, "w.attributes @> "+arg(*in.Attributes)+"::jsonb")
	}

	query := p.selectWorkflows(in.LoadInputs, in.LoadOutputs)
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	if in.SortDesc {
		query += " ORDER BY w.created_at DESC, w.workflow_uuid DESC"
	} else {
		query += " ORDER BY w.created_at ASC, w.workflow_uuid ASC"
	}
	if in.Limit > 0 {
		query += " LIMIT " + arg(in.Limit)
	}
	if in.Offset > 0 {
		query += " OFFSET " + arg(in.Offset)
	}
	var out []Workflow
	err := p.retry(ctx, "list workflows", func(ctx context.Context) error {
		// The simple protocol sends the values inlined, so the listing is
		// planned for them (the pool's statements use generic plans): a
		// filter on ERROR takes the index of failed workflows, not a walk
		// of every row by creation time.
		rows, err := p.pool.Query(ctx, query, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Workflow, error) {
			return scanWorkflow(r, in.LoadInputs, in.LoadOutputs)
		})
		return err
	})
	return out, err
}

// isJSONObject reports whether s is the text of a JSON object (attributes
// are one, as DBOS stores them).
func isJSONObject(s string) bool {
	var object map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &object) == nil && object != nil
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// WorkflowChildren implements SystemDatabase.
func (p *Postgres) WorkflowChildren(ctx context.Context, workflowID string) ([]string, error) {
	var ids []string
	err := p.retry(ctx, "list children of "+workflowID, func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, p.sql("WorkflowChildren"), workflowID)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, err
}

// withDescendants returns ids followed by every descendant not already in it.
func (p *Postgres) withDescendants(ctx context.Context, ids []string) ([]string, error) {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, id := range ids {
		children, err := p.WorkflowChildren(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, c := range children {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// WorkflowFinish implements SystemDatabase.
func (p *Postgres) WorkflowFinish(ctx context.Context, in WorkflowFinishParams) (WorkflowFinishResult, error) {
	results, err := p.WorkflowFinishMany(ctx, []WorkflowFinishParams{in})
	if err != nil {
		return WorkflowFinishResult{}, err
	}
	return results[0].Result, results[0].Err
}

// WorkflowFinishMany implements SystemDatabase.
func (p *Postgres) WorkflowFinishMany(ctx context.Context, outcomes []WorkflowFinishParams) ([]WorkflowFinishOutcome, error) {
	n := len(outcomes)
	results, _ := checkFinishes(outcomes)
	ids, owners, statuses := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	outputs, errs := make([]*string, 0, n), make([]*string, 0, n)
	for i, in := range outcomes {
		if results[i].Err != nil {
			continue
		}
		ids, owners, statuses = append(ids, in.WorkflowID), append(owners, in.OwnerXID), append(statuses, in.Status)
		outputs, errs = append(outputs, in.Output), append(errs, in.Error)
	}
	if len(ids) == 0 {
		return results, nil
	}
	applied := map[finishRun]*string{}
	err := p.retry(ctx, "finish workflows", func(ctx context.Context) error {
		clear(applied)
		rows, err := p.pool.Query(ctx, p.sql("WorkflowFinishMany"), ids, owners, statuses, outputs, errs)
		if err != nil {
			return err
		}
		var r finishRun
		var serialization *string
		_, err = pgx.ForEachRow(rows, []any{&r.id, &r.owner, &serialization}, func() error {
			applied[r] = serialization
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	won := settleFinishes(ctx, outcomes, results, applied, p.WorkflowGet)
	p.notes.add(ChannelWorkflowStatus, won...)
	return results, nil
}

// WorkflowCancel implements SystemDatabase.
func (p *Postgres) WorkflowCancel(ctx context.Context, in WorkflowCancelParams) ([]string, error) {
	ids := in.WorkflowIDs
	if in.IncludeChildren {
		var err error
		if ids, err = p.withDescendants(ctx, ids); err != nil {
			return nil, err
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var owner *string
	if in.OnlyIfOwnedByXID != "" {
		owner = &in.OnlyIfOwnedByXID
	}
	found, changed, err := p.collectFlagged(ctx, "cancel workflows", p.sql("WorkflowCancel"), ids, owner)
	p.notes.add(ChannelWorkflowStatus, changed...)
	return found, err
}

// WorkflowResume implements SystemDatabase.
func (p *Postgres) WorkflowResume(ctx context.Context, in WorkflowResumeParams) ([]string, error) {
	if len(in.WorkflowIDs) == 0 {
		return nil, nil
	}
	queue := in.QueueName
	if queue == "" {
		queue = InternalQueueName
	}
	found, changed, err := p.collectFlagged(ctx, "resume workflows", p.sql("WorkflowResume"), in.WorkflowIDs, queue, in.RequireAll)
	if len(changed) > 0 {
		p.notes.add(ChannelQueue, queue)
	}
	return found, err
}

// WorkflowDelete implements SystemDatabase.
func (p *Postgres) WorkflowDelete(ctx context.Context, in WorkflowDeleteParams) error {
	ids := in.WorkflowIDs
	if in.IncludeChildren {
		var err error
		if ids, err = p.withDescendants(ctx, ids); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return p.retry(ctx, "delete workflows", func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			// The payload and step tables have no foreign key to
			// workflow_status, so they are cleared explicitly.
			for _, q := range []string{"WorkflowDeleteInputs", "WorkflowDeleteOutputs", "WorkflowDeleteSteps", "WorkflowDeleteStatus"} {
				if _, err := tx.Exec(ctx, p.sql(q), ids); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// WorkflowRecover implements SystemDatabase.
func (p *Postgres) WorkflowRecover(ctx context.Context, in WorkflowRecoverParams) ([]string, error) {
	if len(in.ExecutorIDs) == 0 {
		return nil, nil
	}
	return p.collectQueued(ctx, "recover workflows", p.sql("WorkflowRecover"),
		in.ExecutorIDs, in.ApplicationVersion, InternalQueueName, in.ApplicationName)
}

// WorkflowRequeue implements SystemDatabase.
func (p *Postgres) WorkflowRequeue(ctx context.Context, claims []WorkflowClaim) ([]string, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	ids := make([]string, len(claims))
	owners := make([]string, len(claims))
	for i, c := range claims {
		ids[i], owners[i] = c.WorkflowID, c.OwnerXID
	}
	return p.collectQueued(ctx, "requeue workflows", p.sql("WorkflowRequeue"), ids, owners, InternalQueueName)
}

// WorkflowUnclaim implements SystemDatabase.
func (p *Postgres) WorkflowUnclaim(ctx context.Context, claims []WorkflowClaim) ([]string, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	n := len(claims)
	ids, owners := make([]string, n), make([]string, n)
	restore := make([]bool, n)
	versions, apps, executors := make([]*string, n), make([]*string, n), make([]*string, n)
	deadlines := make([]*int64, n)
	for i, c := range claims {
		ids[i], owners[i] = c.WorkflowID, c.OwnerXID
		if pc := c.PreClaim; pc != nil {
			restore[i] = true
			versions[i], apps[i], executors[i], deadlines[i] = pc.ApplicationVersion, pc.ApplicationName, pc.ExecutorID, pc.DeadlineEpochMS
		}
	}
	return p.collectQueued(ctx, "unclaim workflows", p.sql("WorkflowUnclaim"), ids, owners, InternalQueueName,
		restore, versions, apps, executors, deadlines)
}

// WorkflowOrphaned implements SystemDatabase.
func (p *Postgres) WorkflowOrphaned(ctx context.Context, in WorkflowOrphanedParams) ([]WorkflowClaim, error) {
	if in.OwnerPrefix == "" || in.ExecutorID == "" || in.Limit <= 0 {
		return nil, errors.New("workflow orphaned: an executor id, an owner prefix and a positive limit are required")
	}
	held := in.HeldTokens
	if held == nil {
		held = []string{}
	}
	var claims []WorkflowClaim
	err := p.retry(ctx, "list orphaned claims", func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, p.sql("WorkflowOrphaned"), in.ExecutorID, in.OwnerPrefix, in.OlderThan.Milliseconds(), in.Limit, held)
		if err != nil {
			return err
		}
		claims, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (WorkflowClaim, error) {
			var c WorkflowClaim
			err := row.Scan(&c.WorkflowID, &c.OwnerXID)
			return c, err
		})
		return err
	})
	return claims, err
}

// WorkflowDeadLetter implements SystemDatabase.
func (p *Postgres) WorkflowDeadLetter(ctx context.Context, workflowIDs []string, minAttempts int64) ([]string, error) {
	if len(workflowIDs) == 0 {
		return nil, nil
	}
	moved, err := p.collectIDs(ctx, "dead-letter workflows", p.sql("WorkflowDeadLetter"), workflowIDs, minAttempts)
	p.notes.add(ChannelWorkflowStatus, moved...)
	return moved, err
}

// collectFlagged runs a query returning (id, changed) rows: it returns every
// id and the changed ones.
func (p *Postgres) collectFlagged(ctx context.Context, what, query string, args ...any) ([]string, []string, error) {
	var ids, changed []string
	err := p.retry(ctx, what, func(ctx context.Context) error {
		ids, changed = nil, nil
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		var id string
		var flag bool
		_, err = pgx.ForEachRow(rows, []any{&id, &flag}, func() error {
			ids = append(ids, id)
			if flag {
				changed = append(changed, id)
			}
			return nil
		})
		return err
	})
	return ids, changed, err
}

// collectQueued runs a query returning (id, queue) rows of workflows made
// available on queues, and announces each queue once.
func (p *Postgres) collectQueued(ctx context.Context, what, query string, args ...any) ([]string, error) {
	var ids, queues []string
	err := p.retry(ctx, what, func(ctx context.Context) error {
		ids, queues = nil, nil
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		var id string
		var queue *string
		_, err = pgx.ForEachRow(rows, []any{&id, &queue}, func() error {
			ids = append(ids, id)
			if queue != nil {
				queues = append(queues, *queue)
			}
			return nil
		})
		return err
	})
	if err == nil {
		p.notes.add(ChannelQueue, queues...)
	}
	return ids, err
}

func (p *Postgres) collectIDs(ctx context.Context, what, query string, args ...any) ([]string, error) {
	var ids []string
	err := p.retry(ctx, what, func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, err
}

// StepRecord implements SystemDatabase.
func (p *Postgres) StepRecord(ctx context.Context, step StepRecordParams) error {
	results, err := p.StepRecordMany(ctx, []StepRecordParams{step})
	if err != nil {
		return err
	}
	return results[0]
}

type stepKey struct {
	workflowID string
	functionID int
}

// StepRecordMany implements SystemDatabase. One transaction: lock the
// workflows' rows, insert the steps whose run still owns its workflow, then
// classify the steps that met an existing record.
func (p *Postgres) StepRecordMany(ctx context.Context, steps []StepRecordParams) ([]error, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	var results []error
	err := p.retry(ctx, "record steps", func(ctx context.Context) error {
		results = make([]error, len(steps))
		return p.recordSteps(ctx, steps, results)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// stepRecordKey identifies a record of a batch: a step of a workflow as one
// run (owner token) writes it.
type stepRecordKey struct {
	workflowID string
	functionID int
	owner      string
}

// recordSteps writes a batch in one statement (one round trip, committed on
// its own): it locks the workflows' rows in a fixed order against a
// concurrent finish, cancel or recovery, inserts the records whose run still
// owns its workflow, and reports the owners it saw and what it inserted.
// Records that met an existing one are then compared with what is stored.
func (p *Postgres) recordSteps(ctx context.Context, steps []StepRecordParams, results []error) error {
	workflowIDs := make([]string, 0, len(steps))
	seen := map[string]bool{}
	for _, s := range steps {
		if !seen[s.WorkflowID] {
			seen[s.WorkflowID] = true
			workflowIDs = append(workflowIDs, s.WorkflowID)
		}
	}
	sort.Strings(workflowIDs)

	// The columns that are never NULL go as []string, which pgx encodes
	// without reflection or an allocation per element; the others as
	// pointers, nil for NULL.
	cols := struct {
		wf, owner, name            []string
		out, errs, ser, child, app []*string
		fid                        []int32
		started, completed         []*int64
	}{}
	firstAt := map[stepRecordKey]int{}
	for i, s := range steps {
		key := stepRecordKey{s.WorkflowID, s.FunctionID, s.OwnerXID}
		if _, dup := firstAt[key]; dup {
			continue // the same record twice in one batch: classified below
		}
		firstAt[key] = i
		cols.wf = append(cols.wf, s.WorkflowID)
		cols.owner = append(cols.owner, s.OwnerXID)
		cols.fid = append(cols.fid, int32(s.FunctionID))
		cols.name = append(cols.name, s.Name)
		cols.out = append(cols.out, s.Output)
		cols.errs = append(cols.errs, s.Error)
		cols.ser = append(cols.ser, s.Serialization)
		cols.child = append(cols.child, s.ChildWorkflowID)
		cols.started = append(cols.started, s.StartedAt)
		cols.completed = append(cols.completed, s.CompletedAt)
		cols.app = append(cols.app, s.ApplicationName)
	}
	var rows pgx.Rows
	var err error
	if len(cols.wf) == 1 {
		rows, err = p.pool.Query(ctx, p.sql("StepRecordOne"), cols.wf[0], cols.fid[0], cols.owner[0], cols.name[0],
			cols.out[0], cols.errs[0], cols.ser[0], cols.child[0], cols.started[0], cols.completed[0], cols.app[0])
	} else {
		rows, err = p.pool.Query(ctx, p.sql("StepRecordMany"), workflowIDs,
			cols.wf, cols.fid, cols.owner, cols.name, cols.out, cols.errs, cols.ser,
			cols.child, cols.started, cols.completed, cols.app)
	}
	if err != nil {
		return err
	}
	owners := map[string]*string{}
	inserted := map[stepKey]bool{}
	var kind int32
	var id string
	var owner *string
	var fid int32
	_, err = pgx.ForEachRow(rows, []any{&kind, &id, &owner, &fid}, func() error {
		if kind == 1 {
			owners[id] = owner
		} else {
			inserted[stepKey{id, int(fid)}] = true
		}
		return nil
	})
	if err != nil {
		return err
	}

	var conflictWF []string
	var conflictFID []int32
	pending := make([]bool, len(steps))
	for i, s := range steps {
		current, exists := owners[s.WorkflowID]
		switch {
		case !exists:
			results[i] = &NotFoundError{WorkflowID: s.WorkflowID}
		case current == nil || *current != s.OwnerXID:
			results[i] = &FencedError{WorkflowID: s.WorkflowID}
		case inserted[stepKey{s.WorkflowID, s.FunctionID}] && firstAt[stepRecordKey{s.WorkflowID, s.FunctionID, s.OwnerXID}] == i:
			// durable
		default:
			pending[i] = true
			conflictWF = append(conflictWF, s.WorkflowID)
			conflictFID = append(conflictFID, int32(s.FunctionID))
		}
	}
	if len(conflictWF) == 0 {
		return nil
	}
	// Records are never changed once written, so reading them after the
	// insert committed sees what it met.
	rows, err = p.pool.Query(ctx, p.sql("StepGetMany"), conflictWF, conflictFID)
	if err != nil {
		return err
	}
	stored := map[stepKey]Step{}
	var st Step
	_, err = pgx.ForEachRow(rows, []any{&id, &fid, &st.Name, &st.Output, &st.Error, &st.Serialization,
		&st.ChildWorkflowID, &st.StartedAt, &st.CompletedAt}, func() error {
		st.FunctionID = int(fid)
		stored[stepKey{id, int(fid)}] = st
		return nil
	})
	if err != nil {
		return err
	}
	for i, s := range steps {
		if !pending[i] {
			continue
		}
		rec, ok := stored[stepKey{s.WorkflowID, s.FunctionID}]
		if !ok {
			results[i] = fmt.Errorf("workflow %s step %d: conflicting record vanished", s.WorkflowID, s.FunctionID)
			continue
		}
		results[i] = compareStep(s, rec)
	}
	return nil
}

// compareStep decides what an insert that met an existing record means: the
// same content is this run's own earlier write (its acknowledgement lost),
// another name is non-determinism, other content a conflict.
func compareStep(s StepRecordParams, rec Step) error {
	if rec.Name != s.Name {
		return &UnexpectedStepError{WorkflowID: s.WorkflowID, FunctionID: s.FunctionID, Recorded: rec.Name, Attempted: s.Name}
	}
	// NULL and "" are different records: a step with no output is not one
	// whose output is the empty string.
	same := sameText(rec.Output, s.Output) &&
		sameText(rec.Error, s.Error) &&
		sameText(rec.Serialization, s.Serialization) &&
		sameText(rec.ChildWorkflowID, s.ChildWorkflowID)
	if same {
		return nil
	}
	return &StepConflictError{WorkflowID: s.WorkflowID, FunctionID: s.FunctionID}
}

// StepList implements SystemDatabase.
func (p *Postgres) StepList(ctx context.Context, workflowID string) ([]Step, error) {
	var steps []Step
	err := p.retry(ctx, "list steps of "+workflowID, func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, p.sql("StepList"), workflowID)
		if err != nil {
			return err
		}
		steps, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Step, error) {
			var s Step
			var fid int32
			err := r.Scan(&fid, &s.Name, &s.Output, &s.Error, &s.Serialization, &s.ChildWorkflowID, &s.StartedAt, &s.CompletedAt)
			s.FunctionID = int(fid)
			return s, err
		})
		return err
	})
	return steps, err
}

// StepListMany implements SystemDatabase.
func (p *Postgres) StepListMany(ctx context.Context, workflowIDs []string) (map[string][]Step, error) {
	out := map[string][]Step{}
	if len(workflowIDs) == 0 {
		return out, nil
	}
	err := p.retry(ctx, "list steps", func(ctx context.Context) error {
		out = map[string][]Step{}
		rows, err := p.pool.Query(ctx, p.sql("StepListMany"), workflowIDs)
		if err != nil {
			return err
		}
		var id string
		var fid int32
		var st Step
		_, err = pgx.ForEachRow(rows, []any{&id, &fid, &st.Name, &st.Output, &st.Error, &st.Serialization,
			&st.ChildWorkflowID, &st.StartedAt, &st.CompletedAt}, func() error {
			st.FunctionID = int(fid)
			out[id] = append(out[id], st)
			return nil
		})
		return err
	})
	return out, err
}

// QueueDequeue implements SystemDatabase, with the DBOS SDKs' semantics.
//
// Global concurrency and the rate limit count the whole queue even when the
// claim is for one partition; the Partition limits count within
// PartitionKey. Worker limits are this worker's free slots.
//
// The isolation follows what the claim shares with other executors, as the
// SDKs' dequeue budgets do. A limit shared by every executor (a queue-wide
// or partition concurrency or rate limit) is counted and claimed at
// SERIALIZABLE with NOWAIT row locks, so two executors cannot both fill the
// same free slots: the loser gets a lock or serialization error and tries
// again at its next poll. REPEATABLE READ, which the SDKs use, is not
// enough: it relies on every executor trying the same first rows, but
// executors whose candidates differ (other workflow names, application
// versions or partitions) lock disjoint rows, and only predicate locks see
// that each counted the other's claims as absent (write skew: two agents
// serving different workflows of one queue ran two at once under a global
// concurrency of 1). Without shared limits, READ COMMITTED with SKIP LOCKED
// lets executors claim disjoint rows concurrently.
//
// Rows are taken in (priority, created_at) order whether or not the queue
// has priority enabled, as the SDKs do: a queue without it only holds
// priority-0 rows.
func (p *Postgres) QueueDequeue(ctx context.Context, in QueueDequeueParams) ([]Workflow, error) {
	lim := in.Limits
	queueWide := lim.GlobalConcurrency != nil || lim.RateLimitMax != nil
	shared := queueWide || lim.PartitionConcurrency != nil || lim.PartitionRateLimitMax != nil
	claimLimit, err := localClaimLimit(in)
	if err != nil || claimLimit == 0 {
		return nil, err
	}
	// SERIALIZABLE, not the SDKs' REPEATABLE READ, whenever a limit is
	// shared: candidates filtered by workflow name, version or partition
	// may be disjoint from another executor's (see above).
	isolation := pgx.ReadCommitted
	if shared {
		isolation = pgx.Serializable
	}
	var claimed []Workflow
	err = p.retryDequeue(ctx, func(ctx context.Context) error {
		claimed = nil
		tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: isolation})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		// partition is "" for a queue-wide count.
		budget, err := sharedClaimLimit(in, claimLimit,
			func(period time.Duration, partition string) (int, error) {
				var recent int
				err := tx.QueryRow(ctx, p.sql("QueueRecentStarts"), in.QueueName, period.Milliseconds(),
					in.ApplicationName, partition).Scan(&recent)
				return recent, err
			},
			func(partition string) (int, error) {
				var n int
				err := tx.QueryRow(ctx, p.sql("QueueRunningCount"), in.QueueName, in.ApplicationName, partition).Scan(&n)
				return n, err
			})
		if err != nil {
			return err
		}
		if budget == 0 {
			return nil
		}
		var args []any
		arg := func(v any) string {
			args = append(args, v)
			return "$" + strconv.Itoa(len(args))
		}
		// The claim stamps these columns; they are read with the row lock
		// so that an unclaim can restore them (PreClaim).
		q := "SELECT workflow_uuid, application_version, application_name, executor_id, workflow_deadline_epoch_ms FROM " + p.table("workflow_status") +
			" WHERE queue_name = " + arg(in.QueueName) + " AND status = 'ENQUEUED'"
		// Unversioned rows belong to the latest version only; with no
		// version registered, every executor counts as the latest. An
		// executor without a version is no exception: its version is ""
		// and never the latest, so it takes unversioned work only while
		// its application has no version (as DBOS Python decides, where
		// every executor has a version). The latest is read in this
		// statement, not before it: under READ COMMITTED each statement
		// has its own snapshot, and a row enqueued after a version became
		// the latest (a first registration, a promotion) must not be
		// claimed on a decision taken before it.
		version := arg(in.ApplicationVersion)
		q += " AND (application_version = " + version + " OR (application_version IS NULL AND COALESCE((" +
			"SELECT version_name FROM " + p.table("application_versions") +
			" WHERE " + arg(in.ApplicationName) + "::text IS NULL OR application_name = $" + strconv.Itoa(len(args)) + " OR application_name IS NULL" +
			" ORDER BY version_timestamp DESC, created_at DESC, version_name DESC LIMIT 1), " + version + ") = " + version + "))"
		if in.ApplicationName != nil {
			q += " AND (application_name = " + arg(*in.ApplicationName) + " OR application_name IS NULL)"
		}
		if in.PartitionKey != "" {
			q += " AND queue_partition_key = " + arg(in.PartitionKey)
		}
		if len(in.WorkflowNames) > 0 {
			q += " AND name = ANY(" + arg(in.WorkflowNames) + ")"
		}
		if len(in.WorkflowIDs) > 0 {
			q += " AND workflow_uuid = ANY(" + arg(in.WorkflowIDs) + ")"
		}
		q += " ORDER BY priority ASC, created_at ASC"
		if shared {
			q += " FOR UPDATE NOWAIT"
		} else {
			q += " FOR UPDATE SKIP LOCKED"
		}
		if budget > 0 {
			q += " LIMIT " + arg(budget)
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		var candidates []string
		before := map[string]*PreClaim{}
		var id string
		var pre PreClaim
		_, err = pgx.ForEachRow(rows, []any{&id, &pre.ApplicationVersion, &pre.ApplicationName, &pre.ExecutorID, &pre.DeadlineEpochMS}, func() error {
			candidates = append(candidates, id)
			prior := pre
			before[id] = &prior
			return nil
		})
		if err != nil {
			return err
		}
		if len(candidates) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, p.sql("QueueClaim"), candidates, in.ApplicationVersion, in.ExecutorID,
			lim.RateLimitMax != nil || lim.PartitionRateLimitMax != nil, in.ApplicationName, in.OwnerPrefix)
		if err != nil {
			return err
		}
		claimedIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(claimedIDs) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, p.selectWorkflows(true, false)+" WHERE w.workflow_uuid = ANY($1)", claimedIDs)
		if err != nil {
			return err
		}
		byID, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Workflow, error) { return scanWorkflow(r, true, false) })
		if err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return &commitFailed{err}
		}
		// Dispatch in queue order.
		index := map[string]Workflow{}
		for _, w := range byID {
			index[w.ID] = w
		}
		for _, id := range candidates {
			if w, ok := index[id]; ok {
				w.PreClaim = before[id]
				claimed = append(claimed, w)
			}
		}
		return nil
	})
	return claimed, err
}

// retryDequeue retries a claim only when nothing can have been committed: a
// connection that broke before COMMIT was sent took its transaction with it
// (a pooled connection killed while idle fails at BEGIN). A claim whose
// commit acknowledgement was lost is not repeated, since it may have landed
// (its rows are PENDING under tokens nobody holds); recovery re-enqueues it.
// Lock and serialization conflicts with another executor are not errors:
// the next poll tries again.
func (p *Postgres) retryDequeue(ctx context.Context, op func(context.Context) error) error {
	err := p.retry(ctx, "dequeue", func(ctx context.Context) error {
		err := op(ctx)
		var commit *commitFailed
		if errors.As(err, &commit) && !pgconn.SafeToRetry(err) && IsConnectionError(err) {
			return &nonRetryable{err}
		}
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40001" || pgErr.Code == "40P01") {
		return nil
	}
	return err
}

// commitFailed marks an error of COMMIT itself, whose outcome is unknown
// when the connection broke.
type commitFailed struct{ err error }

func (e *commitFailed) Error() string { return e.err.Error() }
func (e *commitFailed) Unwrap() error { return e.err }

// nonRetryable marks a connection error that retry must not repeat. It is
// checked by type, not by hiding the cause: IsConnectionError also matches on
// message text, and callers still need the cause through errors.As.
type nonRetryable struct{ err error }

func (e *nonRetryable) Error() string { return e.err.Error() }
func (e *nonRetryable) Unwrap() error { return e.err }

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// sameText compares nullable text as SQL stores it: NULL equals only NULL.
func sameText(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
