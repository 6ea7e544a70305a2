package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// officialSpellings are the official dbos CLI's names for flags the agent
// spells its own way, accepted on every command so that an operator's
// habits and scripts work unchanged (their one-letter forms are the agent
// flags' shorthands).
var officialSpellings = map[string]string{
	"sys-db-url":          "database-url",
	"application-version": "app-version",
	"application-name":    "app-name",
	"sort-desc":           "desc",
	"queue-name":          "queue",
	"forked-workflow-id":  "new-id",
}

// officialSpelling is the flag-name normalization that maps the official
// spellings onto the agent's.
func officialSpelling(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if ours, ok := officialSpellings[name]; ok {
		return pflag.NormalizedName(ours)
	}
	return pflag.NormalizedName(name)
}

// The orders `workflow list --sort` takes.
const (
	sortAsc  = "ASC"
	sortDesc = "DESC"
)

var sortOrders = []string{sortAsc, sortDesc}

// workflowStatuses are the statuses DBOS stores; `workflow list --status`
// accepts these and nothing else, so that a typo is an error rather than an
// empty table.
var workflowStatuses = []string{
	sysdb.StatusPending, sysdb.StatusEnqueued, sysdb.StatusDelayed, sysdb.StatusSuccess,
	sysdb.StatusError, sysdb.StatusCancelled, sysdb.StatusMaxRecoveryAttemptsExceeded,
}

// scheduleStatuses are the statuses a schedule has.
var scheduleStatuses = []string{sysdb.ScheduleActive, sysdb.SchedulePaused}

// enumValues upper-cases the values given to an enumerated flag and refuses
// any outside allowed, naming the flag and the values it takes.
func enumValues(flag string, values, allowed []string) ([]string, error) {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = strings.ToUpper(strings.TrimSpace(v))
		if !slices.Contains(allowed, out[i]) {
			return nil, fmt.Errorf("--%s: %q is not one of %s", flag, v, strings.Join(allowed, ", "))
		}
	}
	return out, nil
}
