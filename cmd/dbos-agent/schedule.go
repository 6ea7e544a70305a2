package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

func newScheduleCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "schedule", Short: "Create, inspect, pause, backfill and trigger cron-scheduled workflows"}
	cmd.AddCommand(newScheduleListCommand(), newScheduleGetCommand(), newScheduleCreateCommand(),
		newScheduleStatusCommand("pause", "Stop a schedule firing (with automatic backfill, the missed ticks are enqueued on resume)", sysdb.SchedulePaused),
		newScheduleStatusCommand("resume", "Make a paused schedule fire again", sysdb.ScheduleActive),
		newScheduleDeleteCommand(), newScheduleBackfillCommand(), newScheduleTriggerCommand())
	return cmd
}

// scheduleView is how a schedule is shown, in tables and JSON alike.
type scheduleView struct {
	ScheduleID        string `json:"schedule_id"`
	ScheduleName      string `json:"schedule_name"`
	WorkflowName      string `json:"workflow_name"`
	WorkflowClassName string `json:"workflow_class_name,omitempty"`
	Schedule          string `json:"schedule"`
	CronTimezone      string `json:"cron_timezone,omitempty"`
	Status            string `json:"status"`
	// Context is the stored text handed to every tick (JSON as written by
	// the agent and the SDKs).
	Context           string `json:"context"`
	QueueName         string `json:"queue_name,omitempty"`
	ApplicationName   string `json:"application_name,omitempty"`
	AutomaticBackfill bool   `json:"automatic_backfill"`
	// LastFiredAt is as stored (ISO 8601, written by whichever agent or SDK
	// fired last).
	LastFiredAt string `json:"last_fired_at,omitempty"`
	// NextTick is when an active schedule fires next, from now.
	NextTick string `json:"next_tick,omitempty"`
}

func scheduleViewOf(s sysdb.Schedule, now time.Time) scheduleView {
	v := scheduleView{
		ScheduleID: s.ID, ScheduleName: s.Name, WorkflowName: s.WorkflowName, WorkflowClassName: derefOr(s.WorkflowClassName),
		Schedule: s.Cron, CronTimezone: derefOr(s.CronTimezone), Status: s.Status, Context: s.Context,
		QueueName: derefOr(s.QueueName), ApplicationName: derefOr(s.ApplicationName), AutomaticBackfill: s.AutomaticBackfill,
		LastFiredAt: derefOr(s.LastFiredAtRaw),
	}
	if s.Status == sysdb.ScheduleActive {
		if sched, loc, err := agent.ParseCron(s.Cron, derefOr(s.CronTimezone)); err == nil {
			v.NextTick = sched.Next(now.In(loc)).Format(time.RFC3339)
		}
	}
	return v
}

func newScheduleListCommand() *cobra.Command {
	var (
		db                databaseFlags
		asJSON            bool
		statuses, wfNames []string
		prefix, appName   string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules by name",
		Args:  cobra.NoArgs,
		RunE: db.withEngine(func(cmd *cobra.Command, _ []string, engine *agent.Agent) error {
			validStatuses, err := enumValues("status", statuses, scheduleStatuses)
			if err != nil {
				return err
			}
			// As the application's own listing: its schedules and the
			// unclaimed ones (all, with no application named).
			list, err := engine.ListSchedules(cmd.Context(), agent.Caller{App: appName},
				agent.ListSchedulesParams{Statuses: validStatuses, WorkflowNames: wfNames, NamePrefix: prefix})
			if err != nil {
				return err
			}
			now := time.Now()
			views := make([]scheduleView, len(list))
			for i, s := range list {
				views[i] = scheduleViewOf(s, now)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, views)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCHEDULE\tWORKFLOW\tCRON\tSTATUS\tQUEUE\tLAST FIRED\tNEXT TICK")
			for _, v := range views {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ScheduleName, v.WorkflowName, cronWithZone(v),
					v.Status, dash(v.QueueName), dash(v.LastFiredAt), dash(v.NextTick))
			}
			return tw.Flush()
		}),
	}
	db.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringSliceVar(&statuses, "status", nil, "only these statuses (ACTIVE, PAUSED)")
	f.StringSliceVar(&wfNames, "workflow", nil, "only schedules of these workflows")
	f.StringVar(&prefix, "prefix", "", "only schedule names starting with this")
	f.StringVar(&appName, "app-name", "", "only this application's schedules (and unclaimed ones)")
	return cmd
}

func cronWithZone(v scheduleView) string {
	if v.CronTimezone == "" {
		return v.Schedule
	}
	return v.Schedule + " (" + v.CronTimezone + ")"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newScheduleGetCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one schedule",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			s, err := engine.GetSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := scheduleViewOf(s, time.Now())
			if asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return printSchedule(cmd.OutOrStdout(), v)
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printSchedule(out io.Writer, v scheduleView) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, val string) {
		if val != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, val)
		}
	}
	row("Schedule", v.ScheduleName)
	row("ID", v.ScheduleID)
	row("Workflow", v.WorkflowName)
	row("Class", v.WorkflowClassName)
	row("Cron", v.Schedule)
	row("Timezone", v.CronTimezone)
	row("Status", v.Status)
	row("Context", v.Context)
	row("Queue", v.QueueName)
	row("Application", v.ApplicationName)
	row("Automatic backfill", fmt.Sprint(v.AutomaticBackfill))
	row("Last fired", v.LastFiredAt)
	row("Next tick", v.NextTick)
	return tw.Flush()
}

func newScheduleCreateCommand() *cobra.Command {
	var (
		db                                             databaseFlags
		workflow, class, cronSpec, scheduleContext, tz string
		queue, appName                                 string
		backfill                                       bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME --workflow W --cron EXPR",
		Short: "Create a schedule: the workflow runs at every tick of the cron expression",
		Long: "Create a schedule: the workflow runs at every tick of the cron expression (5 fields, or 6 with seconds\n" +
			"first, in --timezone, UTC by default), with the scheduled time and --context as its inputs. A connected\n" +
			"worker that registered the workflow (of --app-name, when given) fires it; every agent and SDK on the\n" +
			"database fires a tick once.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sched, loc, err := agent.ParseCron(cronSpec, tz)
			if err != nil {
				return err
			}
			if scheduleContext == "" {
				scheduleContext = "null"
			}
			if !json.Valid([]byte(scheduleContext)) {
				return fmt.Errorf("--context must be JSON text, like '{\"region\":\"eu\"}' or '\"nightly\"'")
			}
			// The rules a create_schedule request is held to (the engine
			// holds it to them again), named for this command's flags.
			s := protocol.Schedule{ScheduleName: args[0], WorkflowName: workflow, WorkflowClassName: class,
				Cron: cronSpec, Status: sysdb.ScheduleActive, Context: scheduleContext, AutomaticBackfill: backfill,
				CronTimezone: tz, QueueName: queue, ApplicationName: appName}
			if err := s.Validate("schedule"); err != nil {
				return err
			}
			engine, closeEngine, err := openEngine(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer closeEngine()
			if err := engine.CreateSchedule(cmd.Context(), agent.Caller{}, s); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s created; next tick %s\n", args[0],
				sched.Next(time.Now().In(loc)).Format(time.RFC3339))
			return nil
		},
	}
	db.register(cmd)
	f := cmd.Flags()
	f.StringVar(&workflow, "workflow", "", "the workflow function's name, as its workers register it (required)")
	f.StringVar(&class, "class", "", "the workflow's class name, where the language has them")
	f.StringVar(&cronSpec, "cron", "", "cron expression: 5 fields, or 6 with seconds first (required)")
	f.StringVar(&scheduleContext, "context", "", "JSON value handed to every tick (default null)")
	f.StringVar(&tz, "timezone", "", "IANA time zone of the cron expression (default UTC)")
	f.StringVar(&queue, "queue", "", "queue the ticks are enqueued on (default the internal queue)")
	f.BoolVar(&backfill, "backfill", false, "enqueue the ticks missed while no worker fired the schedule")
	f.StringVar(&appName, "app-name", "", "the application that owns the schedule and runs its workflow")
	_ = cmd.MarkFlagRequired("workflow")
	_ = cmd.MarkFlagRequired("cron")
	return cmd
}

func optionalFlag(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newScheduleStatusCommand(verb, short, status string) *cobra.Command {
	var db databaseFlags
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			if err := engine.SetScheduleStatus(cmd.Context(), args[0], status); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s is %s\n", args[0], status)
			return nil
		}),
	}
	db.register(cmd)
	return cmd
}

func newScheduleDeleteCommand() *cobra.Command {
	var db databaseFlags
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule (the workflows it enqueued stay)",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			if err := engine.DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s deleted\n", args[0])
			return nil
		}),
	}
	db.register(cmd)
	return cmd
}

// tickView is one tick a backfill or trigger enqueued.
type tickView struct {
	WorkflowID    string `json:"workflow_id"`
	ScheduledTime string `json:"scheduled_time"`
	// Created is false when the tick was enqueued before (by an agent, an
	// SDK or an earlier backfill): nothing was written.
	Created bool `json:"created"`
}

func tickViewOf(t agent.Tick) tickView {
	return tickView{WorkflowID: t.WorkflowID, ScheduledTime: t.Time.Format(time.RFC3339Nano), Created: t.Created}
}

func printTicks(out io.Writer, ticks []tickView) {
	enqueued := 0
	for _, t := range ticks {
		state := "already enqueued"
		if t.Created {
			state = "enqueued"
			enqueued++
		}
		fmt.Fprintf(out, "%s\t%s\n", t.WorkflowID, state)
	}
	fmt.Fprintf(out, "%d ticks, %d enqueued now\n", len(ticks), enqueued)
}

func newScheduleBackfillCommand() *cobra.Command {
	var (
		db         databaseFlags
		asJSON     bool
		start, end string
	)
	cmd := &cobra.Command{
		Use:   "backfill NAME --start RFC3339 --end RFC3339",
		Short: "Enqueue every tick in [start, end) that was not enqueued yet",
		Long: "Enqueue every tick of the schedule in [start, end) that was not enqueued yet, with the workflow ids\n" +
			"the scheduler gives them (sched-NAME-TIME): a tick an agent or SDK already fired is not enqueued twice.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, err := parseRequiredTime("start", start)
			if err != nil {
				return err
			}
			to, err := parseRequiredTime("end", end)
			if err != nil {
				return err
			}
			if !to.After(from) {
				return errors.New("--end must be after --start")
			}
			engine, closeEngine, err := openEngine(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer closeEngine()
			ticks, err := engine.BackfillSchedule(cmd.Context(), args[0], from, to)
			if err != nil {
				return err
			}
			views := make([]tickView, len(ticks))
			for i, t := range ticks {
				views[i] = tickViewOf(t)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), views)
			}
			printTicks(cmd.OutOrStdout(), views)
			return nil
		},
	}
	db.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&start, "start", "", "first instant of the range, RFC 3339 (required)")
	f.StringVar(&end, "end", "", "end of the range (excluded), RFC 3339 (required)")
	_ = cmd.MarkFlagRequired("start")
	_ = cmd.MarkFlagRequired("end")
	return cmd
}

func parseRequiredTime(name, value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s: %q is not an RFC 3339 time (like 2026-01-02T15:04:05Z)", name, value)
	}
	return t, nil
}

func newScheduleTriggerCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trigger NAME",
		Short: "Enqueue one run of the schedule's workflow now, outside its ticks",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			tick, err := engine.TriggerSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := tickViewOf(tick)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workflow %s enqueued\n", v.WorkflowID)
			return nil
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
