package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

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
