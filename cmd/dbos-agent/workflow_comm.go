package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/values"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// Commands that steer workflows (fork, rewind, delete, attributes) and show
// what they exchanged (events, messages, streams).

// payload is a stored value with its serialization tag. In JSON it is as DBOS
// stores it: portable_json as the JSON it is, anything else (py_pickle,
// DBOS_JSON, ...) as its raw text; in tables it is decoded for people
// (values.Display).
type payload struct {
	value         string
	serialization *string
}

// json returns the value as JSON when it is portable_json text.
func (p payload) json() (json.RawMessage, bool) {
	if p.serialization == nil || *p.serialization != sysdb.PortableJSON {
		return nil, false
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(p.value)); err != nil {
		return nil, false
	}
	return compact.Bytes(), true
}

// MarshalJSON writes portable_json as a JSON value and anything else as a
// JSON string holding the raw text, in full.
func (p payload) MarshalJSON() ([]byte, error) {
	if raw, ok := p.json(); ok {
		return raw, nil
	}
	return json.Marshal(p.value)
}

// cell is the value for a table: one line, cut to a width that keeps the
// table readable (--json has it in full).
func (p payload) cell() string {
	if raw, ok := p.json(); ok {
		return truncate(string(raw), 100)
	}
	return truncate(oneLine.Replace(values.Display(p.serialization, p.value)), 60)
}

var oneLine = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`)

// tableWriter is a tabwriter with the header written.
func tableWriter(out io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// requireWorkflow makes a listing of an unknown id an error rather than an
// empty table.
func requireWorkflow(cmd *cobra.Command, engine *agent.Agent, id string) error {
	_, err := engine.GetWorkflow(cmd.Context(), agent.GetWorkflowParams{WorkflowID: id})
	return err
}

// listingCommand is a `workflow <use> WORKFLOW_ID [--json]` command that
// shows rows read for one existing workflow: as JSON, or as a table.
func listingCommand[V any](use, short string, flags func(*cobra.Command),
	read func(cmd *cobra.Command, engine *agent.Agent, id string) ([]V, error),
	header func() string, row func(V) string) *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   use + " WORKFLOW_ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			if err := requireWorkflow(cmd, engine, args[0]); err != nil {
				return err
			}
			views, err := read(cmd, engine, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if views == nil {
					views = []V{}
				}
				return printJSON(out, views)
			}
			tw := tableWriter(out, header())
			for _, v := range views {
				fmt.Fprintln(tw, row(v))
			}
			return tw.Flush()
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (payloads in full)")
	if flags != nil {
		flags(cmd)
	}
	return cmd
}

// eventView is one event value: current, or (with FunctionID) one the
// workflow published at that step.
type eventView struct {
	FunctionID    *int    `json:"function_id,omitempty"`
	Key           string  `json:"key"`
	Serialization *string `json:"serialization"`
	Value         payload `json:"value"`
}

func newWorkflowEventsCommand() *cobra.Command {
	var history bool
	return listingCommand("events", "List a workflow's events (with --history, every value published)",
		func(cmd *cobra.Command) {
			cmd.Flags().BoolVar(&history, "history", false, "every value published, by the step that published it")
		},
		func(cmd *cobra.Command, engine *agent.Agent, id string) ([]eventView, error) {
			if history {
				entries, err := engine.EventHistory(cmd.Context(), id)
				if err != nil {
					return nil, err
				}
				views := make([]eventView, len(entries))
				for i, e := range entries {
					views[i] = eventView{FunctionID: &e.FunctionID, Key: e.Key, Serialization: e.Serialization,
						Value: payload{e.Value, e.Serialization}}
				}
				return views, nil
			}
			events, err := engine.ListEvents(cmd.Context(), id)
			if err != nil {
				return nil, err
			}
			views := make([]eventView, len(events))
			for i, e := range events {
				views[i] = eventView{Key: e.Key, Serialization: e.Serialization, Value: payload{e.Value, e.Serialization}}
			}
			return views, nil
		},
		func() string {
			if history {
				return "STEP\tKEY\tSERIALIZATION\tVALUE"
			}
			return "KEY\tSERIALIZATION\tVALUE"
		},
		func(v eventView) string {
			line := fmt.Sprintf("%s\t%s\t%s", v.Key, dash(derefOr(v.Serialization)), v.Value.cell())
			if history {
				return intText(v.FunctionID) + "\t" + line
			}
			return line
		})
}

func intText(n *int) string {
	if n == nil {
		return ""
	}
	return fmt.Sprint(*n)
}

// messageView is one message sent to a workflow.
type messageView struct {
	MessageID string `json:"message_id"`
	// Topic is null for the default topic.
	Topic         *string `json:"topic"`
	CreatedAt     string  `json:"created_at"`
	Consumed      bool    `json:"consumed"`
	ConsumedBy    *int    `json:"consumed_by_step,omitempty"`
	Serialization *string `json:"serialization"`
	Message       payload `json:"message"`
}

func newWorkflowMessagesCommand() *cobra.Command {
	return listingCommand("messages", "List the messages sent to a workflow, oldest first",
		nil,
		func(cmd *cobra.Command, engine *agent.Agent, id string) ([]messageView, error) {
			list, err := engine.ListMessages(cmd.Context(), id)
			if err != nil {
				return nil, err
			}
			views := make([]messageView, len(list))
			for i, m := range list {
				views[i] = messageView{MessageID: m.MessageID, Topic: m.Topic, CreatedAt: epochMS(m.CreatedAt),
					Consumed: m.Consumed, ConsumedBy: m.ConsumedByFunctionID, Serialization: m.Serialization,
					Message: payload{m.Message, m.Serialization}}
			}
			return views, nil
		},
		func() string { return "CREATED\tTOPIC\tCONSUMED\tBY STEP\tSERIALIZATION\tMESSAGE" },
		func(v messageView) string {
			topic := "(default)"
			if v.Topic != nil {
				topic = *v.Topic
			}
			consumed := map[bool]string{true: "yes", false: "no"}[v.Consumed]
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", v.CreatedAt, topic, consumed, dash(intText(v.ConsumedBy)),
				dash(derefOr(v.Serialization)), v.Message.cell())
		})
}

// streamView is one stream of a workflow: its values by offset and whether
// it was closed.
type streamView struct {
	Key    string            `json:"key"`
	Closed bool              `json:"closed"`
	Values []streamValueView `json:"values"`
}

type streamValueView struct {
	Offset        int     `json:"offset"`
	FunctionID    int     `json:"function_id"`
	Serialization *string `json:"serialization"`
	Value         payload `json:"value"`
}

// isCloseMarker reports whether a stream entry is DBOS's closing marker.
func isCloseMarker(e sysdb.StreamEntry) bool {
	return e.Value == sysdb.StreamClosedValue && e.Serialization != nil && *e.Serialization == sysdb.PortableJSON
}

func newWorkflowStreamsCommand() *cobra.Command {
	var key string
	return listingCommand("streams", "List a workflow's streams: values by key and offset, and whether closed",
		func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&key, "key", "", "only this stream")
		},
		func(cmd *cobra.Command, engine *agent.Agent, id string) ([]streamView, error) {
			entries, err := engine.ListStreams(cmd.Context(), id)
			if err != nil {
				return nil, err
			}
			var streams []streamView
			for _, e := range entries {
				if key != "" && e.Key != key {
					continue
				}
				if len(streams) == 0 || streams[len(streams)-1].Key != e.Key {
					streams = append(streams, streamView{Key: e.Key, Values: []streamValueView{}})
				}
				s := &streams[len(streams)-1]
				if isCloseMarker(e) {
					s.Closed = true
					continue
				}
				s.Values = append(s.Values, streamValueView{Offset: e.Offset, FunctionID: e.FunctionID,
					Serialization: e.Serialization, Value: payload{e.Value, e.Serialization}})
			}
			return streams, nil
		},
		func() string { return "KEY\tOFFSET\tSTEP\tSERIALIZATION\tVALUE" },
		func(s streamView) string {
			var lines []string
			for _, v := range s.Values {
				lines = append(lines, fmt.Sprintf("%s\t%d\t%d\t%s\t%s", s.Key, v.Offset, v.FunctionID, dash(derefOr(v.Serialization)), v.Value.cell()))
			}
			state := "(open)"
			if s.Closed {
				state = "(closed)"
			}
			return strings.Join(append(lines, fmt.Sprintf("%s\t-\t-\t-\t%s", s.Key, state)), "\n")
		})
}

func newWorkflowForkCommand() *cobra.Command {
	var (
		db      databaseFlags
		to      requeueFlags
		newID   string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "fork WORKFLOW_ID [--step N]",
		Short: "Start a new workflow from another's steps below N (default 1: all run anew); prints its id",
		Long: "Start a new workflow from another one: same function and inputs, the steps (and the events and stream\n" +
			"values) below --step copied, the rest run anew. The fork is ENQUEUED on --queue (default the internal\n" +
			"queue) for --app-version (default the original's); the original keeps its history. Prints the new id.",
		Args: cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			if to.step < 0 || timeout < 0 {
				return errors.New("--step and --timeout must not be negative")
			}
			id, err := engine.Fork(cmd.Context(), agent.Caller{}, agent.ForkParams{
				WorkflowID: args[0], NewWorkflowID: newID, StartStep: to.step, AppVersion: to.version,
				QueueName: to.queue, PartitionKey: to.partitionKey, Timeout: timeout,
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		}),
	}
	db.register(cmd)
	to.register(cmd, "the first step that runs anew; the steps below it are copied", "the original's", 1)
	cmd.Flags().StringVarP(&newID, "new-id", "f", "", "the fork's workflow id (default a new UUID)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "its timeout (like 30s or 1h; default none)")
	return cmd
}

// requeueFlags say from which step, and where, fork and rewind enqueue a
// workflow.
type requeueFlags struct {
	step                         int
	queue, version, partitionKey string
}

// register adds the flags; defaultStep 0 makes --step required.
func (f *requeueFlags) register(cmd *cobra.Command, stepUsage, versionDefault string, defaultStep int) {
	fl := cmd.Flags()
	if defaultStep == 0 {
		fl.IntVarP(&f.step, "step", "S", 0, stepUsage+" (required)")
		_ = cmd.MarkFlagRequired("step")
	} else {
		fl.IntVarP(&f.step, "step", "S", defaultStep, stepUsage)
	}
	fl.StringVarP(&f.queue, "queue", "q", "", "queue it is enqueued on (default the internal queue)")
	fl.StringVarP(&f.version, "app-version", "v", "", "application version that may run it (default "+versionDefault+")")
	fl.StringVar(&f.partitionKey, "partition-key", "", "its partition, on a partitioned queue")
}

func newWorkflowRewindCommand() *cobra.Command {
	var db databaseFlags
	var to requeueFlags
	cmd := &cobra.Command{
		Use:   "rewind WORKFLOW_ID --step N",
		Short: "Run an ended workflow again from step N, under its own id",
		Long: "Run a workflow that ended (succeeded, failed, was cancelled) again under its own id: its steps from\n" +
			"--step on are dropped, events published from there revert to their earlier values, messages consumed\n" +
			"from there and unconsumed ones are deleted, and it is ENQUEUED on --queue (default the internal queue).\n" +
			"A workflow still running must be cancelled first.",
		Args: cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			if to.step < 0 {
				return errors.New("--step must not be negative (DBOS Python numbers steps from 1, DBOS TypeScript from 0: its first step replays nothing)")
			}
			err := engine.Rewind(cmd.Context(), agent.RewindParams{
				WorkflowID: args[0], StartStep: to.step, AppVersion: to.version,
				QueueName: to.queue, PartitionKey: to.partitionKey,
			})
			if err != nil {
				return err
			}
			return printStatus(cmd, engine, args[0], "")
		}),
	}
	db.register(cmd)
	to.register(cmd, "the first step to run again; the history from it on is dropped", "the one it has", 0)
	return cmd
}

// printStatus prints a workflow's status after a command changed it, with
// a note.
func printStatus(cmd *cobra.Command, engine *agent.Agent, id, note string) error {
	w, err := engine.GetWorkflow(cmd.Context(), agent.GetWorkflowParams{WorkflowID: id})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "workflow %s is %s%s\n", w.ID, w.Status, note)
	return nil
}

func newWorkflowDeleteCommand() *cobra.Command {
	var db databaseFlags
	var children bool
	cmd := &cobra.Command{
		Use:   "delete WORKFLOW_ID...",
		Short: "Delete workflows with everything stored under them (asks nothing)",
		Long: "Delete workflows with their steps, inputs, outputs, events, streams and messages, and with --children\n" +
			"every workflow they started, recursively. It asks nothing, and does not cancel: a workflow still running\n" +
			"should be cancelled first. Every id must name a workflow, else nothing is deleted.",
		Args: cobra.MinimumNArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			// What will go is read first: the delete itself says nothing.
			for _, id := range args {
				if err := requireWorkflow(cmd, engine, id); err != nil {
					return err
				}
			}
			tree, err := workflowTree(cmd, engine, args, children)
			if err != nil {
				return err
			}
			if err := engine.Delete(cmd.Context(), agent.DeleteParams{WorkflowIDs: args, DeleteChildren: children}); err != nil {
				return err
			}
			for _, w := range tree {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted workflow %s%s\n", w.id, w.childOf())
			}
			return nil
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&children, "children", false, "also delete every workflow they started, recursively")
	return cmd
}

// treeNode is a workflow of a tree a command acts on.
type treeNode struct{ id, parent string }

func (n treeNode) childOf() string {
	if n.parent == "" {
		return ""
	}
	return " (child of " + n.parent + ")"
}

// workflowTree lists the workflows named, each followed (with descendants)
// by every workflow it started, recursively, breadth first, each once.
func workflowTree(cmd *cobra.Command, engine *agent.Agent, ids []string, descendants bool) ([]treeNode, error) {
	var tree []treeNode
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		tree = append(tree, treeNode{id: id})
		if !descendants {
			continue
		}
		below, err := engine.WorkflowChildren(cmd.Context(), id)
		if err != nil {
			return nil, err
		}
		if len(below) == 0 {
			continue
		}
		rows, err := engine.ListWorkflows(cmd.Context(), agent.ListWorkflowsParams{WorkflowIDs: below})
		if err != nil {
			return nil, err
		}
		parents := make(map[string]string, len(rows))
		for _, w := range rows {
			parents[w.ID] = derefOr(w.ParentWorkflowID)
		}
		for _, d := range below {
			if !seen[d] {
				seen[d] = true
				tree = append(tree, treeNode{id: d, parent: parents[d]})
			}
		}
	}
	return tree, nil
}

func newWorkflowAttributesCommand() *cobra.Command {
	var (
		db         databaseFlags
		set, merge string
		clear      bool
	)
	cmd := &cobra.Command{
		Use:   "attributes WORKFLOW_ID [--set JSON | --merge JSON | --clear]",
		Short: "Show, replace, merge into or clear a workflow's attributes",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			ctx := cmd.Context()
			setGiven := cmd.Flags().Changed("set")
			mergeGiven := cmd.Flags().Changed("merge")
			if setGiven || mergeGiven || clear {
				var attributes *string
				switch {
				case setGiven:
					attributes = &set
				case mergeGiven:
					attributes = &merge
				}
				if attributes != nil {
					var object map[string]any
					if err := json.Unmarshal([]byte(*attributes), &object); err != nil || object == nil {
						return fmt.Errorf("attributes must be a JSON object, like '{\"team\":\"payments\"}'")
					}
				}
				err := engine.UpdateAttributes(ctx, agent.UpdateAttributesParams{WorkflowID: args[0], Attributes: attributes, Merge: mergeGiven})
				if err != nil {
					return err
				}
			}
			w, err := engine.GetWorkflow(ctx, agent.GetWorkflowParams{WorkflowID: args[0]})
			if err != nil {
				return err
			}
			if w.Attributes == nil {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), "null")
				return err
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, []byte(*w.Attributes), "", "  "); err != nil {
				pretty.Reset()
				pretty.WriteString(*w.Attributes)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), pretty.String())
			return err
		}),
	}
	db.register(cmd)
	f := cmd.Flags()
	f.StringVar(&set, "set", "", "replace the attributes with this JSON object")
	f.StringVar(&merge, "merge", "", "add the top-level keys of this JSON object, replacing equal keys")
	f.BoolVar(&clear, "clear", false, "remove the attributes")
	cmd.MarkFlagsMutuallyExclusive("set", "merge", "clear")
	return cmd
}
