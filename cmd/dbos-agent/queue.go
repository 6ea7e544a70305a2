package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

func newQueueCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Inspect queues"}
	cmd.AddCommand(newQueueListCommand(), newQueueGetCommand())
	return cmd
}

// queueView is how a queue is shown, in tables and JSON alike. Limits are
// as stored; see limitsNote for how a partitioned queue applies them.
type queueView struct {
	Name                        string   `json:"name"`
	Registered                  bool     `json:"registered"`
	Concurrency                 *int     `json:"concurrency,omitempty"`
	WorkerConcurrency           *int     `json:"worker_concurrency,omitempty"`
	RateLimitMax                *int     `json:"rate_limit_max,omitempty"`
	RateLimitPeriodSec          *float64 `json:"rate_limit_period_sec,omitempty"`
	PriorityEnabled             bool     `json:"priority_enabled"`
	PartitionQueue              bool     `json:"partition_queue"`
	PartitionConcurrency        *int     `json:"partition_concurrency,omitempty"`
	PartitionWorkerConcurrency  *int     `json:"partition_worker_concurrency,omitempty"`
	PartitionRateLimitMax       *int     `json:"partition_rate_limit_max,omitempty"`
	PartitionRateLimitPeriodSec *float64 `json:"partition_rate_limit_period_sec,omitempty"`
	PollingIntervalSec          *float64 `json:"polling_interval_sec,omitempty"`
	ApplicationName             string   `json:"application_name,omitempty"`
	Enqueued                    int64    `json:"enqueued"`
	Pending                     int64    `json:"pending"`
	Delayed                     int64    `json:"delayed"`
}

// queueViewOf is how a queue is shown: a registered one with its whole row
// (partition limits and polling interval), the others with their counts.
func queueViewOf(q agent.QueueState) queueView {
	v := queueView{Name: q.Name, Registered: q.Registered, Concurrency: q.Concurrency,
		WorkerConcurrency: q.WorkerConcurrency, RateLimitMax: q.RateLimitMax, RateLimitPeriodSec: q.RateLimitPeriodSec,
		PriorityEnabled: q.PriorityEnabled, PartitionQueue: q.PartitionQueue, ApplicationName: derefOr(q.ApplicationName),
		Enqueued: q.Enqueued, Pending: q.Pending, Delayed: q.Delayed}
	if cfg := q.Config; cfg != nil {
		v.PartitionConcurrency = cfg.PartitionConcurrency
		v.PartitionWorkerConcurrency = cfg.PartitionWorkerConcurrency
		v.PartitionRateLimitMax = cfg.PartitionRateLimitMax
		v.PartitionRateLimitPeriodSec = cfg.PartitionRateLimitPeriodSec
		polling := cfg.PollingIntervalSec
		if polling == 0 {
			polling = sysdb.DefaultPollingIntervalSec
		}
		v.PollingIntervalSec = &polling
	}
	return v
}

func (v queueView) hasPartitionLimits() bool {
	return v.PartitionConcurrency != nil || v.PartitionWorkerConcurrency != nil || v.PartitionRateLimitMax != nil
}

// limitsNote says how the limits apply, as every agent and SDK applies them.
func (v queueView) limitsNote() string {
	switch {
	case v.PartitionQueue && !v.hasPartitionLimits():
		return "partitioned without partition limits: the limits above apply to each partition"
	case v.hasPartitionLimits():
		return "queue-wide limits count the whole queue; partition limits count each partition"
	}
	return ""
}

// partitionSummary is the PARTITIONS column of the queue table.
func (v queueView) partitionSummary() string {
	switch {
	case v.PartitionQueue && !v.hasPartitionLimits():
		return "limits per partition"
	case !v.hasPartitionLimits():
		return "-"
	}
	s := "concurrency " + optInt(v.PartitionConcurrency) + ", worker " + optInt(v.PartitionWorkerConcurrency)
	if r := rateLimit(v.PartitionRateLimitMax, v.PartitionRateLimitPeriodSec); r != "-" {
		s += ", " + r
	}
	return s
}

func rateLimit(max *int, periodSec *float64) string {
	if max == nil || periodSec == nil {
		return "-"
	}
	return fmt.Sprintf("%d per %gs", *max, *periodSec)
}

func newQueueListCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List queues with their limits and how many workflows wait and run on each",
		Args:  cobra.NoArgs,
		RunE: db.withEngine(func(cmd *cobra.Command, _ []string, engine *agent.Agent) error {
			queues, err := engine.ListQueues(cmd.Context(), agent.ListQueuesParams{WithConfig: true})
			if err != nil {
				return err
			}
			views := make([]queueView, len(queues))
			for i, q := range queues {
				views[i] = queueViewOf(q)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, views)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "QUEUE\tENQUEUED\tPENDING\tDELAYED\tCONCURRENCY\tWORKER CONCURRENCY\tRATE LIMIT\tPARTITIONS")
			for _, v := range views {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", v.Name, v.Enqueued, v.Pending, v.Delayed,
					optInt(v.Concurrency), optInt(v.WorkerConcurrency), rateLimit(v.RateLimitMax, v.RateLimitPeriodSec),
					v.partitionSummary())
			}
			return tw.Flush()
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newQueueGetCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one queue: its limits, partition limits and load",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			q, err := engine.GetQueue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := queueViewOf(q)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return printQueue(cmd.OutOrStdout(), v)
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printQueue(out io.Writer, v queueView) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, val string) {
		if val != "" && val != "-" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, val)
		}
	}
	row("Queue", v.Name)
	row("Registered", fmt.Sprint(v.Registered))
	row("Application", v.ApplicationName)
	row("Concurrency", optInt(v.Concurrency))
	row("Worker concurrency", optInt(v.WorkerConcurrency))
	row("Rate limit", rateLimit(v.RateLimitMax, v.RateLimitPeriodSec))
	row("Priority enabled", fmt.Sprint(v.PriorityEnabled))
	row("Partitioned", fmt.Sprint(v.PartitionQueue || v.hasPartitionLimits()))
	row("Partition concurrency", optInt(v.PartitionConcurrency))
	row("Partition worker concurrency", optInt(v.PartitionWorkerConcurrency))
	row("Partition rate limit", rateLimit(v.PartitionRateLimitMax, v.PartitionRateLimitPeriodSec))
	row("Limits", v.limitsNote())
	if v.PollingIntervalSec != nil {
		row("Polling interval", fmt.Sprintf("%gs", *v.PollingIntervalSec))
	}
	row("Enqueued", fmt.Sprint(v.Enqueued))
	row("Pending", fmt.Sprint(v.Pending))
	row("Delayed", fmt.Sprint(v.Delayed))
	return tw.Flush()
}

func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
