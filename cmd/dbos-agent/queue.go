package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newQueueCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Inspect queues"}
	cmd.AddCommand(newQueueListCommand())
	return cmd
}

type queueView struct {
	Name               string   `json:"name"`
	Registered         bool     `json:"registered"`
	Concurrency        *int     `json:"concurrency,omitempty"`
	WorkerConcurrency  *int     `json:"worker_concurrency,omitempty"`
	RateLimitMax       *int     `json:"rate_limit_max,omitempty"`
	RateLimitPeriodSec *float64 `json:"rate_limit_period_sec,omitempty"`
	PriorityEnabled    bool     `json:"priority_enabled"`
	PartitionQueue     bool     `json:"partition_queue"`
	Enqueued           int64    `json:"enqueued"`
	Pending            int64    `json:"pending"`
	Delayed            int64    `json:"delayed"`
}

func newQueueListCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List queues with their limits and how many workflows wait and run on each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			database, err := openDatabase(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer database.Close()
			queues, err := database.QueueList(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]queueView, len(queues))
			for i, q := range queues {
				views[i] = queueView{Name: q.Name, Registered: q.Registered, Concurrency: q.Concurrency,
					WorkerConcurrency: q.WorkerConcurrency, RateLimitMax: q.RateLimitMax, RateLimitPeriodSec: q.RateLimitPeriodSec,
					PriorityEnabled: q.PriorityEnabled, PartitionQueue: q.PartitionQueue,
					Enqueued: q.Enqueued, Pending: q.Pending, Delayed: q.Delayed}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, views)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "QUEUE\tENQUEUED\tPENDING\tDELAYED\tCONCURRENCY\tWORKER CONCURRENCY\tRATE LIMIT")
			for _, v := range views {
				rate := "-"
				if v.RateLimitMax != nil && v.RateLimitPeriodSec != nil {
					rate = fmt.Sprintf("%d per %gs", *v.RateLimitMax, *v.RateLimitPeriodSec)
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", v.Name, v.Enqueued, v.Pending, v.Delayed,
					optInt(v.Concurrency), optInt(v.WorkerConcurrency), rate)
			}
			return tw.Flush()
		},
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
