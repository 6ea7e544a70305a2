package e2e

// The fault suite's accounts: what the database holds at the end, what the
// workers' side-effect logs say ran, and the report of both per phase.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// chaosEvent is one line of a side-effect log.
type chaosEvent struct {
	kind, workflowID string
	step             int
	run              string
	at               time.Time
	detail           string
}

func (e chaosEvent) pid() int {
	pid, _ := strconv.Atoi(strings.SplitN(e.run, ".", 2)[0])
	return pid
}

// readEffects reads every worker's side-effect log; malformed counts the
// lines that do not parse (none should: each is one fsynced write).
func (h *chaosHarness) readEffects() (events []chaosEvent, malformed int) {
	files, err := filepath.Glob(filepath.Join(h.logDir, "effects-*.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			h.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.SplitN(sc.Text(), " ", 6)
			if len(fields) < 5 {
				malformed++
				continue
			}
			step, err1 := strconv.Atoi(fields[2])
			ns, err2 := strconv.ParseInt(fields[4], 10, 64)
			if err1 != nil || err2 != nil {
				malformed++
				continue
			}
			ev := chaosEvent{kind: fields[0], workflowID: fields[1], step: step, run: fields[3], at: time.Unix(0, ns)}
			if len(fields) == 6 {
				ev.detail = fields[5]
			}
			events = append(events, ev)
		}
		f.Close()
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	return events, malformed
}

// chaosStepKey names step k of a workflow.
type chaosStepKey struct {
	id string
	k  int
}

// chaosRow is a workflow as the database holds it at the end.
type chaosRow struct {
	status, executor string
	output, errText  *string
	attempts         int64
	updatedAt        time.Time
	steps            map[int]string // step k -> recorded output
}

func (h *chaosHarness) readWorkflows() map[string]*chaosRow {
	wfTable := h.db.table("workflow_status")
	outTable := h.db.table("workflow_output")
	stepTable := h.db.table("operation_outputs")
	// Outcomes live in workflow_output (schema v125); older rows in
	// workflow_status itself.
	rows, err := h.db.query(`SELECT w.workflow_uuid, w.status, coalesce(w.executor_id, ''),
		coalesce(o.output, w.output), coalesce(o.error, w.error), coalesce(w.recovery_attempts, 0), w.updated_at
		FROM ` + wfTable + ` w LEFT JOIN ` + outTable + ` o USING (workflow_uuid) WHERE w.workflow_uuid LIKE 'w%'`)
	if err != nil {
		h.t.Fatalf("read workflows: %v", err)
	}
	out := map[string]*chaosRow{}
	for rows.Next() {
		var id string
		var updated int64
		r := &chaosRow{steps: map[int]string{}}
		if err := rows.Scan(&id, &r.status, &r.executor, &r.output, &r.errText, &r.attempts, &updated); err != nil {
			h.t.Fatalf("read workflows: %v", err)
		}
		r.updatedAt = time.UnixMilli(updated)
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		h.t.Fatalf("read workflows: %v", err)
	}
	steps, err := h.db.query(`SELECT workflow_uuid, function_name, coalesce(output, '') FROM ` + stepTable + `
		WHERE workflow_uuid LIKE 'w%' AND function_name LIKE 'step-%'`)
	if err != nil {
		h.t.Fatalf("read steps: %v", err)
	}
	for steps.Next() {
		var id, name, output string
		if err := steps.Scan(&id, &name, &output); err != nil {
			h.t.Fatalf("read steps: %v", err)
		}
		k, err := strconv.Atoi(strings.TrimPrefix(name, "step-"))
		if r := out[id]; r != nil && err == nil {
			r.steps[k] = output
		}
	}
	if err := steps.Err(); err != nil {
		h.t.Fatalf("read steps: %v", err)
	}
	return out
}

// chaosCounts are one phase's (or the whole run's) figures.
type chaosCounts struct {
	workerKills, agentKills, drops  int
	started, acked, reExecuted, run int
	stepErrors                      map[string]int // "fail database_unavailable" -> count
	completed                       int
	lost, wrong, stranded, rerun    int
}

type chaosResult struct {
	lost, wrong, stranded, rerun []string
	report, verdict              string
}

func (r chaosResult) failed() bool {
	return len(r.lost)+len(r.wrong)+len(r.stranded)+len(r.rerun) > 0
}

// errorClass is what a failure's text starts with: the protocol error's
// name ("database_unavailable") or the client's own ("client closed").
func errorClass(detail string) string {
	class, _, _ := strings.Cut(detail, ": ")
	return truncate(class, 40)
}

// tally compares what the database holds with what was expected and with
// what the side-effect logs say ran, and writes the report.
func (h *chaosHarness) tally(drain *chaosPhase) chaosResult {
	events, malformed := h.readEffects()
	rows := h.readWorkflows()
	windows := append(append([]*chaosPhase{}, h.phases...), drain)
	phaseOf := func(at time.Time) int {
		for i, p := range windows {
			if !at.Before(p.start) && at.Before(p.end) {
				return i
			}
		}
		return len(windows) - 1
	}
	counts := make([]chaosCounts, len(windows))
	for i := range counts {
		counts[i].stepErrors = map[string]int{}
	}
	h.mu.Lock()
	faults := append([]chaosFault(nil), h.faults...)
	agents := append([]*agentProc(nil), h.agents...)
	h.mu.Unlock()
	handBack := handBackFailures(agents)
	killedAt := map[int]time.Time{}
	for _, f := range faults {
		c := &counts[phaseOf(f.at)]
		switch f.kind {
		case "worker_kill":
			c.workerKills++
			killedAt[f.pid] = f.at
		case "agent_kill":
			c.agentKills++
		case "drop", "cut":
			c.drops++
		}
	}

	// Steps: a start in a run that began after the step's first ack is a
	// re-run of an acknowledged step; other repeated starts are the
	// at-least-once re-execution of a step whose ack never came.
	runBegan := map[string]time.Time{}
	lastRun := map[string]string{}            // workflow -> its latest run
	runsOf := map[string]int{}                // workflow -> runs begun
	lastEvent := map[string]chaosEvent{}      // run -> its latest event
	firstAck := map[chaosStepKey]chaosEvent{} // the step's first acknowledgement
	starts := map[chaosStepKey]int{}          // starts seen so far
	var rerunDetail []string
	late := 0 // starts after an ack by runs that began before it (superseded runs)
	for _, ev := range events {
		c := &counts[phaseOf(ev.at)]
		key := chaosStepKey{ev.workflowID, ev.step}
		lastEvent[ev.run] = ev
		switch ev.kind {
		case "run":
			c.run++
			runBegan[ev.run] = ev.at
			lastRun[ev.workflowID] = ev.run
			runsOf[ev.workflowID]++
		case "start":
			c.started++
			if ack, ok := firstAck[key]; ok {
				if runBegan[ev.run].After(ack.at) {
					c.rerun++
					rerunDetail = append(rerunDetail, fmt.Sprintf("%s step %d: acknowledged to run %s at %s, run again by run %s (began %s)",
						ev.workflowID, ev.step, ack.run, h.rel(ack.at), ev.run, h.rel(runBegan[ev.run])))
				} else {
					late++
				}
			} else if starts[key] > 0 {
				c.reExecuted++
			}
			starts[key]++
		case "ack":
			c.acked++
			if _, ok := firstAck[key]; !ok {
				firstAck[key] = ev
			}
		case "fail", "wait":
			c.stepErrors[ev.kind+" "+errorClass(ev.detail)]++
		}
	}
	for _, r := range rows {
		if r.status == "SUCCESS" {
			counts[phaseOf(r.updatedAt)].completed++
		}
	}

	// Workflows, by the wave (phase) they were enqueued in.
	res := chaosResult{rerun: rerunDetail}
	strandedByCause := map[string]int{}
	for pi, p := range h.phases {
		for _, id := range p.wave {
			r := rows[id]
			seed := h.seeds[id]
			switch {
			case r == nil:
				res.lost = append(res.lost, id+": enqueue acknowledged, no row at the end")
				counts[pi].lost++
			case r.status == "PENDING" || r.status == "ENQUEUED":
				cause, detail := h.explainStranded(id, r, lastRun[id], runsOf[id], runBegan, lastEvent, killedAt, handBack, agents, windows, phaseOf)
				strandedByCause[cause]++
				res.stranded = append(res.stranded, detail)
				counts[pi].stranded++
			case r.status == "ERROR":
				res.wrong = append(res.wrong, fmt.Sprintf("%s: ERROR %s", id, deref(r.errText)))
				counts[pi].wrong++
			case r.status != "SUCCESS":
				res.lost = append(res.lost, fmt.Sprintf("%s: ended %s without completing", id, r.status))
				counts[pi].lost++
			default:
				if problem := h.checkSuccess(id, seed, r, starts); problem != "" {
					res.wrong = append(res.wrong, id+": "+problem)
					counts[pi].wrong++
				}
			}
		}
	}

	total := chaosCounts{stepErrors: map[string]int{}}
	for _, c := range counts {
		total.workerKills += c.workerKills
		total.agentKills += c.agentKills
		total.drops += c.drops
		total.started += c.started
		total.acked += c.acked
		total.reExecuted += c.reExecuted
		total.run += c.run
		total.completed += c.completed
		total.lost += c.lost
		total.wrong += c.wrong
		total.stranded += c.stranded
		total.rerun += c.rerun
		for k, v := range c.stepErrors {
			total.stepErrors[k] += v
		}
	}
	// Re-runs are counted where the repeated start happened; lost, wrong and
	// stranded by the wave the workflow belongs to.

	var b strings.Builder
	fmt.Fprintf(&b, "fault suite, %s form: %d workflows of %d steps, %d worker processes x %d, worker SIGKILL every %s, sysdb's default retry window %s (the agent retries until the database returns)\n",
		h.s.form, len(h.seeds), h.s.steps, h.s.workers, h.s.concurrency, h.s.killEvery, sysdbRetryWindow)
	fmt.Fprintf(&b, "ran %s; %d worker processes started; %d runs began; %d log lines unreadable\n\n",
		time.Since(h.began).Round(time.Second), h.workers.started(), total.run, malformed)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\ttime\twave\twave done in\tworker kills\tagent kills\tconn drops\tstarted\tacked\tre-executed\tstep errors\tcompleted\tlost\twrong\tstranded\tre-run\t")
	for i, p := range windows {
		c := counts[i]
		wave, done := "-", "not done"
		if p.drainedIn > 0 {
			done = p.drainedIn.Round(100 * time.Millisecond).String()
		}
		if len(p.wave) > 0 {
			wave = strconv.Itoa(len(p.wave))
		}
		if p.missedMarks > 0 {
			done += fmt.Sprintf(" (%d marks missed)", p.missedMarks)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", p.name,
			p.end.Sub(p.start).Round(100*time.Millisecond), wave, done, c.workerKills, c.agentKills, c.drops,
			c.started, c.acked, c.reExecuted, sum(c.stepErrors), c.completed, c.lost, c.wrong, c.stranded, c.rerun)
	}
	fmt.Fprintf(tw, "total\t%s\t%d\t\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
		time.Since(h.began).Round(time.Second), len(h.seeds), total.workerKills, total.agentKills, total.drops,
		total.started, total.acked, total.reExecuted, sum(total.stepErrors), total.completed,
		total.lost, total.wrong, total.stranded, total.rerun)
	tw.Flush()
	b.WriteString("\ncolumns: wave = workflows enqueued as the phase began; wave done in = from the end of its faults until none of them was PENDING or ENQUEUED;\n" +
		"started/acked = step bodies begun / checkpoints acknowledged; re-executed = a step begun again whose ack never came (allowed);\n" +
		"re-run = a step begun again by a run handed out after its ack (never allowed); completed = reached SUCCESS in the phase;\n" +
		"lost, wrong, stranded by the wave the workflow was enqueued in\n")
	if late > 0 {
		fmt.Fprintf(&b, "%d step starts came after the step's ack from runs handed out before it (a superseded run still going; allowed)\n", late)
	}
	for i, p := range windows {
		if len(counts[i].stepErrors) > 0 {
			fmt.Fprintf(&b, "step errors in %q: %s\n", p.name, formatCounts(counts[i].stepErrors))
		}
	}
	for _, a := range agents {
		for _, needle := range []string{"could not hand", "gave up after", "queue poll failed"} {
			if n, first := countLines(a.log(), needle); n > 0 {
				fmt.Fprintf(&b, "agent pid %d logged %q %d times; first: %s\n", a.cmd.Process.Pid, needle, n, first)
			}
		}
	}

	var verdict []string
	if len(res.lost) > 0 {
		verdict = append(verdict, fmt.Sprintf("%d lost", len(res.lost)))
	}
	if len(res.wrong) > 0 {
		verdict = append(verdict, fmt.Sprintf("%d wrong", len(res.wrong)))
	}
	if len(res.stranded) > 0 {
		verdict = append(verdict, fmt.Sprintf("%d stranded (%s)", len(res.stranded), formatCounts(strandedByCause)))
	}
	if len(res.rerun) > 0 {
		verdict = append(verdict, fmt.Sprintf("%d acknowledged steps run again", len(res.rerun)))
	}
	if len(verdict) == 0 {
		res.verdict = "none lost, none wrong, none stranded, no acknowledged step run again"
		fmt.Fprintf(&b, "\nverdict: %s\n", res.verdict)
	} else {
		res.verdict = strings.Join(verdict, "; ")
		fmt.Fprintf(&b, "\nverdict: FAIL: %s\n", res.verdict)
		for _, l := range []struct {
			what  string
			items []string
		}{{"lost", res.lost}, {"wrong", res.wrong}, {"stranded", res.stranded}, {"re-run", res.rerun}} {
			for i, item := range l.items {
				if i == 50 {
					fmt.Fprintf(&b, "  %s: ... and %d more\n", l.what, len(l.items)-50)
					break
				}
				fmt.Fprintf(&b, "  %s: %s\n", l.what, item)
			}
		}
		for _, items := range [][]string{res.lost, res.wrong, res.stranded, res.rerun} {
			for _, item := range firstN(items, 5) {
				res.verdict += "\n  " + item
			}
		}
	}
	res.report = b.String()
	if path := os.Getenv("CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(res.report), 0o644); err != nil {
			h.t.Errorf("write report: %v", err)
		}
	}
	return res
}

// checkSuccess checks a SUCCESS workflow's output and recorded steps, and
// that every recorded step's side effect is in a log.
func (h *chaosHarness) checkSuccess(id string, seed int, r *chaosRow, starts map[chaosStepKey]int) string {
	if want := chaosExpectedOutput(seed, h.s.steps); deref(r.output) != want {
		return fmt.Sprintf("SUCCESS with output %s, want %s", deref(r.output), want)
	}
	if len(r.steps) != h.s.steps {
		return fmt.Sprintf("SUCCESS with %d steps recorded, want %d", len(r.steps), h.s.steps)
	}
	for k := 1; k <= h.s.steps; k++ {
		if want := chaosStepOutput(seed, k); r.steps[k] != want {
			return fmt.Sprintf("step %d recorded %s, want %s", k, r.steps[k], want)
		}
		if starts[chaosStepKey{id, k}] == 0 {
			return fmt.Sprintf("step %d is recorded but no worker logged running it", k)
		}
	}
	return ""
}

// explainStranded says what became of a workflow left PENDING or ENQUEUED:
// a cause (to count) and the details (to read). runs is how many runs of
// it began.
func (h *chaosHarness) explainStranded(id string, r *chaosRow, run string, runs int, runBegan map[string]time.Time,
	lastEvent map[string]chaosEvent, killedAt map[int]time.Time, handBack map[int]string, agents []*agentProc,
	windows []*chaosPhase, phaseOf func(time.Time) int,
) (cause, detail string) {
	detail = fmt.Sprintf("%s %s (executor %q, recovery attempts %d, %d/%d steps recorded, %d runs began)",
		id, r.status, r.executor, r.attempts, len(r.steps), h.s.steps, runs)
	// Each claim counts an attempt: a PENDING row with more attempts than
	// runs was claimed last by a dequeue that handed it to nobody.
	if r.status == "PENDING" && r.attempts > int64(runs) {
		var mentions []string
		for _, a := range agents {
			for _, line := range strings.Split(a.log(), "\n") {
				if strings.Contains(line, `"`+id+`"`) {
					mentions = append(mentions, truncate(line, 300))
				}
			}
		}
		detail += ": its last claim reached no worker"
		if len(mentions) > 0 {
			detail += "; the agents' last lines about it: " + strings.Join(mentions[max(0, len(mentions)-2):], " | ")
		}
		// sysdb does not repeat a dequeue whose COMMIT lost its
		// connection (it may have landed): the agent logs "queue poll
		// failed" without "gave up", and the claim waits for a restart.
		n := 0
		for _, a := range agents {
			for _, line := range strings.Split(a.log(), "\n") {
				if strings.Contains(line, "queue poll failed") && !strings.Contains(line, "gave up after") {
					n++
				}
			}
		}
		return "claimed by a dequeue but never handed to a worker", detail +
			fmt.Sprintf("; the agents logged %d queue polls that failed at once, without retrying (a dequeue whose commit acknowledgement was lost is not repeated)", n)
	}
	if run == "" {
		return "never dequeued", detail + ": no run of it ever began"
	}
	began := runBegan[run]
	last := lastEvent[run]
	detail += fmt.Sprintf(": last run %s began %s in %q; its last event %s step %d at %s",
		run, h.rel(began), windows[phaseOf(began)].name, last.kind, last.step, h.rel(last.at))
	if last.detail != "" {
		detail += " (" + last.detail + ")"
	}
	pid := last.pid()
	killed, wasKilled := killedAt[pid]
	if wasKilled {
		detail += fmt.Sprintf("; its worker (pid %d) was SIGKILLed at %s in %q", pid, h.rel(killed), windows[phaseOf(killed)].name)
	} else {
		detail += fmt.Sprintf("; its worker (pid %d) was not killed", pid)
	}
	failure, handBackFailed := handBack[pid]
	switch {
	case last.kind == "fail" || last.kind == "wait":
		// The run returned the error: the client's finish is all that
		// could write its outcome, and nothing holds the run any more.
		return fmt.Sprintf("run returned on %s %s, its outcome never written", last.kind, errorClass(last.detail)), detail
	case wasKilled && handBackFailed:
		return "worker SIGKILLed, the agent's hand-back of its runs failed", detail + "; the agent logged: " + failure
	case wasKilled && h.duringOutage(killed):
		return "worker SIGKILLed while the database was away, its runs never handed back", detail
	case wasKilled:
		return "worker SIGKILLed, its runs never handed back", detail
	default:
		return "run still held by a worker that was not killed", detail
	}
}

// duringOutage says whether at fell between a cut of the database and its
// restoration.
func (h *chaosHarness) duringOutage(at time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	down := false
	for _, f := range h.faults {
		if f.at.After(at) {
			break
		}
		switch f.kind {
		case "cut", "drop":
			down = true
		case "restore":
			down = false
		}
	}
	return down
}

// handBackFailures reads the agents' logs for runs of a closed worker that
// could not be handed back: the worker's pid -> what the agent said.
func handBackFailures(agents []*agentProc) map[int]string {
	out := map[int]string{}
	for _, a := range agents {
		for _, line := range strings.Split(a.log(), "\n") {
			if !strings.Contains(line, "could not hand a closed worker") {
				continue
			}
			var entry struct {
				Msg   string `json:"msg"`
				Peer  string `json:"peer"`
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(line), &entry) != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimPrefix(entry.Peer, "pid ")); err == nil {
				out[pid] = truncate(fmt.Sprintf("%q: %s", entry.Msg, entry.Error), 240)
			}
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func (h *chaosHarness) rel(at time.Time) string {
	return "+" + at.Sub(h.began).Round(100*time.Millisecond).String()
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s x%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func countLines(log, needle string) (int, string) {
	n, first := 0, ""
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, needle) {
			if n == 0 {
				first = truncate(line, 400)
			}
			n++
		}
	}
	return n, first
}

func firstN(items []string, n int) []string {
	if len(items) > n {
		return append(items[:n:n], fmt.Sprintf("... and %d more", len(items)-n))
	}
	return items
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
