package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/values"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// withEngine makes a command body that runs against the engine over the
// system database (see openEngine), closed afterwards.
func (f *databaseFlags) withEngine(run func(cmd *cobra.Command, args []string, engine *agent.Agent) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		engine, closeEngine, err := openEngine(cmd.Context(), *f)
		if err != nil {
			return err
		}
		defer closeEngine()
		return run(cmd, args, engine)
	}
}

// openEngine opens the system database (see openDatabase) and the engine
// over it, one-shot: an operator command runs the very operations the
// agent's sessions run, but none of the agent's services (no recovery,
// pollers, sweeps or scheduler). Its rows carry the executor id an agent on
// this host would (DBOS__VMID, default local); whoever claims them replaces
// it. The returned func closes the database.
func openEngine(ctx context.Context, db databaseFlags) (*agent.Agent, func(), error) {
	database, err := openDatabase(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	engine, err := agent.NewOneShot(agent.Config{DB: database, ExecutorID: firstNonEmpty(os.Getenv("DBOS__VMID"), "local")})
	if err != nil {
		database.Close()
		return nil, nil, err
	}
	return engine, database.Close, nil
}

// openDatabase opens the system database for an operator command. It never
// migrates: an operator command must not change the schema of a database
// the SDKs share; it refuses one below the version it understands.
func openDatabase(ctx context.Context, db databaseFlags) (sysdb.Backend, error) {
	target, err := db.resolve()
	if err != nil {
		return nil, err
	}
	return sysdb.Open(ctx, target.url, sysdb.OpenOptions{
		Schema: target.schema, Password: target.password, SkipMigrations: true, MaxConns: 2, RetryFor: 5 * time.Second,
		ConnectionLabel: "dbos-agent-cli",
	})
}

func newWorkflowCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "workflow", Short: "List, inspect, cancel, resume, fork, rewind and delete workflows"}
	cmd.AddCommand(newWorkflowListCommand(), newWorkflowGetCommand(), newWorkflowStepsCommand(),
		newWorkflowCancelCommand(), newWorkflowResumeCommand(), newWorkflowForkCommand(), newWorkflowRewindCommand(),
		newWorkflowDeleteCommand(), newWorkflowEventsCommand(), newWorkflowMessagesCommand(), newWorkflowStreamsCommand(),
		newWorkflowAttributesCommand(), newWorkflowQueueCommand())
	return cmd
}

// newWorkflowQueueCommand is `workflow queue list`, as the official dbos
// CLI has it: the workflows on queues that have not finished.
func newWorkflowQueueCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Workflows on queues"}
	cmd.AddCommand(workflowListCommand(true))
	return cmd
}

// workflowView is how a workflow is shown, in tables and JSON alike.
type workflowView struct {
	WorkflowID       string `json:"workflow_id"`
	Status           string `json:"status"`
	Name             string `json:"name"`
	ClassName        string `json:"class_name,omitempty"`
	QueueName        string `json:"queue_name,omitempty"`
	ExecutorID       string `json:"executor_id,omitempty"`
	AppName          string `json:"application_name,omitempty"`
	AppVersion       string `json:"application_version,omitempty"`
	CreatedAt        string `json:"created_at"`
	UpdatedAt        string `json:"updated_at"`
	StartedAt        string `json:"started_at,omitempty"`
	CompletedAt      string `json:"completed_at,omitempty"`
	RecoveryAttempts int64  `json:"recovery_attempts"`
	ParentWorkflowID string `json:"parent_workflow_id,omitempty"`
	ForkedFrom       string `json:"forked_from,omitempty"`
	// Attributes is the stored JSON object.
	Attributes    json.RawMessage `json:"attributes,omitempty"`
	Serialization string          `json:"serialization,omitempty"`
	Inputs        *string         `json:"inputs,omitempty"`
	Output        *string         `json:"output,omitempty"`
	Error         *string         `json:"error,omitempty"`
}

func epochMS(ms int64) string {
	if ms == 0 {
		return ""
	}
	// Milliseconds always written, so that columns line up.
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func epochMSPtr(ms *int64) string {
	if ms == nil {
		return ""
	}
	return epochMS(*ms)
}

func viewOf(w sysdb.Workflow) workflowView {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	v := workflowView{
		WorkflowID: w.ID, Status: w.Status, Name: w.Name, ClassName: s(w.ClassName), QueueName: s(w.QueueName),
		ExecutorID: s(w.ExecutorID), AppName: s(w.ApplicationName), AppVersion: s(w.ApplicationVersion),
		CreatedAt: epochMS(w.CreatedAt), UpdatedAt: epochMS(w.UpdatedAt), StartedAt: epochMSPtr(w.StartedAt),
		CompletedAt: epochMSPtr(w.CompletedAt), RecoveryAttempts: w.RecoveryAttempts,
		ParentWorkflowID: s(w.ParentWorkflowID), ForkedFrom: s(w.ForkedFrom), Serialization: s(w.Serialization),
		Inputs: w.Inputs, Output: w.Output, Error: w.Error,
	}
	if w.Attributes != nil && json.Valid([]byte(*w.Attributes)) {
		v.Attributes = json.RawMessage(*w.Attributes)
	}
	return v
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newWorkflowListCommand() *cobra.Command { return workflowListCommand(false) }

// workflowListCommand lists workflows; queued, only those on a queue and, with
// no --status, still DELAYED, ENQUEUED or PENDING (DBOS's list_queued_workflows).
func workflowListCommand(queued bool) *cobra.Command {
	short := "List workflows, newest first by default"
	if queued {
		short = "List the workflows on queues not yet finished (delayed, enqueued or running), newest first by default"
	}
	var (
		users                              []string
		db                                 databaseFlags
		asJSON, desc, payloads             bool
		statuses, names, queues, executors []string
		versions, apps                     []string
		prefix, startTime, endTime, sort   string
		limit, offset                      int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			validStatuses, err := enumValues("status", statuses, workflowStatuses)
			if err != nil {
				return err
			}
			if sort != "" {
				order, err := enumValues("sort", []string{sort}, sortOrders)
				if err != nil {
					return err
				}
				desc = order[0] == sortDesc
			}
			p := agent.ListWorkflowsParams{
				Statuses: validStatuses, Names: names, QueueNames: queues, ExecutorIDs: executors,
				AppVersions: versions, ApplicationNames: apps, Limit: limit, Offset: offset,
				SortDesc: desc, LoadInputs: payloads, LoadOutputs: payloads,
				AuthenticatedUsers: users, QueuesOnly: queued,
			}
			if prefix != "" {
				p.IDPrefixes = []string{prefix}
			}
			if p.CreatedAfter, err = parseTimeFlag("start-time", startTime); err != nil {
				return err
			}
			if p.CreatedBefore, err = parseTimeFlag("end-time", endTime); err != nil {
				return err
			}
			engine, closeEngine, err := openEngine(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer closeEngine()
			wfs, err := engine.ListWorkflows(cmd.Context(), p)
			if err != nil {
				return err
			}
			views := make([]workflowView, len(wfs))
			for i, w := range wfs {
				views[i] = viewOf(w)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, views)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			header := "WORKFLOW ID\tSTATUS\tNAME\tQUEUE\tEXECUTOR\tVERSION\tCREATED"
			if payloads {
				header += "\tOUTCOME"
			}
			fmt.Fprintln(tw, header)
			for i, v := range views {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s", v.WorkflowID, v.Status, v.Name, v.QueueName, v.ExecutorID, v.AppVersion, v.CreatedAt)
				if payloads {
					fmt.Fprintf(tw, "\t%s", workflowOutcome(wfs[i]))
				}
				fmt.Fprintln(tw)
			}
			return tw.Flush()
		},
	}
	db.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, jsonAsStoredHelp)
	f.BoolVarP(&desc, "desc", "d", true, "newest first")
	f.StringVar(&sort, "sort", "", "order by creation time: desc (newest first, the default) or asc; overrides --desc")
	f.BoolVar(&payloads, "payloads", false, "include inputs, outputs and errors (in the table, the outcome decoded)")
	f.StringSliceVarP(&statuses, "status", "S", nil, "only these statuses ("+strings.Join(workflowStatuses, ", ")+")")
	f.StringSliceVarP(&names, "name", "n", nil, "only these workflow names")
	f.StringSliceVarP(&users, "user", "u", nil, "only workflows run by these authenticated users")
	f.StringSliceVarP(&queues, "queue", "q", nil, "only these queues")
	f.StringSliceVar(&executors, "executor", nil, "only these executor ids")
	f.StringSliceVarP(&versions, "app-version", "v", nil, "only these application versions")
	f.StringSliceVarP(&apps, "app-name", "a", nil, "only these applications (and unclaimed rows)")
	f.StringVar(&prefix, "prefix", "", "only workflow ids starting with this")
	f.StringVarP(&startTime, "start-time", "t", "", "created at or after (ISO 8601; UTC without a zone)")
	f.StringVarP(&endTime, "end-time", "e", "", "created at or before (ISO 8601; UTC without a zone)")
	f.IntVarP(&limit, "limit", "l", 100, "at most this many (0 = all)")
	f.IntVarP(&offset, "offset", "o", 0, "skip this many")
	return cmd
}

// timeFlagLayouts are the times the time flags take: RFC 3339, and the ISO
// 8601 forms the official CLI takes without a zone (read as UTC).
var timeFlagLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"}

// parseTimeFlag parses an optional time flag (zero when not given).
func parseTimeFlag(name, value string) (time.Time, error) {
	if value == "" {
		return time.Time{}, nil
	}
	for _, layout := range timeFlagLayouts {
		if t, err := time.Parse(layout, value); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--%s: %q is not an ISO 8601 time (like 2026-01-02T15:04:05Z, or 2026-01-02 for midnight UTC)", name, value)
}

func newWorkflowGetCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get WORKFLOW_ID",
		Short: "Show one workflow with its inputs and outcome",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			w, err := engine.GetWorkflow(cmd.Context(), agent.GetWorkflowParams{WorkflowID: args[0], LoadPayloads: true})
			if err != nil {
				return err
			}
			v := viewOf(w)
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, v)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			row := func(k, val string) {
				if val != "" {
					fmt.Fprintf(tw, "%s:\t%s\n", k, val)
				}
			}
			row("Workflow ID", v.WorkflowID)
			row("Status", v.Status)
			row("Name", v.Name)
			row("Class", v.ClassName)
			row("Queue", v.QueueName)
			row("Executor", v.ExecutorID)
			row("Application", v.AppName)
			row("Version", v.AppVersion)
			row("Created", v.CreatedAt)
			row("Started", v.StartedAt)
			row("Completed", v.CompletedAt)
			row("Recovery attempts", fmt.Sprint(v.RecoveryAttempts))
			row("Parent", v.ParentWorkflowID)
			row("Forked from", v.ForkedFrom)
			row("Attributes", string(v.Attributes))
			row("Serialization", v.Serialization)
			// Decoded for people; --json has them as stored.
			serialization := w.Serialization
			row("Inputs", shown(serialization, v.Inputs))
			row("Output", shown(serialization, v.Output))
			row("Error", shown(serialization, v.Error))
			return tw.Flush()
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, jsonAsStoredHelp)
	return cmd
}

// jsonAsStoredHelp documents the choice that --json keeps values as DBOS
// stores them (what DBOS's clients decode), while tables decode them.
const jsonAsStoredHelp = "print JSON, values as stored (tables show them decoded)"

// workflowOutcome is a workflow's error or output decoded, on one line cut
// to a table's width.
func workflowOutcome(w sysdb.Workflow) string {
	if w.Error != nil {
		return "error: " + truncate(oneLine.Replace(shown(w.Serialization, w.Error)), 60)
	}
	return truncate(oneLine.Replace(shown(w.Serialization, w.Output)), 60)
}

// shown is a stored value decoded for people (values.Display), "" for none.
func shown(serialization, stored *string) string {
	if stored == nil {
		return ""
	}
	return values.Display(serialization, *stored)
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type stepView struct {
	FunctionID      int     `json:"function_id"`
	Name            string  `json:"name"`
	Output          *string `json:"output,omitempty"`
	Error           *string `json:"error,omitempty"`
	Serialization   *string `json:"serialization,omitempty"`
	ChildWorkflowID *string `json:"child_workflow_id,omitempty"`
	StartedAt       string  `json:"started_at,omitempty"`
	CompletedAt     string  `json:"completed_at,omitempty"`
}

func newWorkflowStepsCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "steps WORKFLOW_ID",
		Short: "List a workflow's recorded steps",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			if err := requireWorkflow(cmd, engine, args[0]); err != nil {
				return err
			}
			steps, err := engine.ListSteps(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			views := make([]stepView, len(steps))
			for i, s := range steps {
				views[i] = stepView{FunctionID: s.FunctionID, Name: s.Name, Output: s.Output, Error: s.Error,
					Serialization: s.Serialization, ChildWorkflowID: s.ChildWorkflowID,
					StartedAt: epochMSPtr(s.StartedAt), CompletedAt: epochMSPtr(s.CompletedAt)}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, views)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tOUTCOME\tCOMPLETED")
			for _, v := range views {
				outcome := "ok"
				switch {
				case v.Error != nil:
					outcome = "error: " + truncate(oneLine.Replace(shown(v.Serialization, v.Error)), 60)
				case v.Output != nil:
					outcome = truncate(oneLine.Replace(shown(v.Serialization, v.Output)), 60)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", v.FunctionID, v.Name, outcome, v.CompletedAt)
			}
			return tw.Flush()
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, jsonAsStoredHelp)
	return cmd
}

// truncate cuts s to n characters, marking the cut.
func truncate(s string, n int) string {
	runes := []rune(s)
	if len(runes) <= n {
		return s
	}
	return string(runes[:n]) + "..."
}

func newWorkflowCancelCommand() *cobra.Command {
	var db databaseFlags
	var children bool
	cmd := &cobra.Command{
		Use:   "cancel WORKFLOW_ID",
		Short: "Cancel a workflow (and its children); its run stops at its next step",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			tree, err := workflowTree(cmd, engine, args, children)
			if err != nil {
				return err
			}
			if _, err := engine.Cancel(cmd.Context(), agent.CancelParams{WorkflowID: args[0], CancelChildren: children}); err != nil {
				return err
			}
			for _, w := range tree {
				if err := printStatus(cmd, engine, w.id, w.childOf()); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&children, "children", false, "also cancel every workflow it started, recursively")
	return cmd
}

func newWorkflowResumeCommand() *cobra.Command {
	var db databaseFlags
	var queue string
	cmd := &cobra.Command{
		Use:   "resume WORKFLOW_ID",
		Short: "Resume a cancelled or failed-over workflow from its last step",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			if err := engine.Resume(cmd.Context(), agent.ResumeParams{WorkflowIDs: args, QueueName: queue}); err != nil {
				return err
			}
			return printStatus(cmd, engine, args[0], "")
		}),
	}
	db.register(cmd)
	cmd.Flags().StringVar(&queue, "queue", "", "queue to resume onto (default the internal queue)")
	return cmd
}
