package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

var (
	chromiumOnce sync.Once
	chromiumExec string
	chromiumErr  error
)

// chromiumPath is Debian's chromium, installed by scripts/ensure-chromium.sh
// when missing (so a fresh machine's `go test` gets it too; `make test-go`
// runs the script first).
func chromiumPath(t *testing.T) string {
	t.Helper()
	chromiumOnce.Do(func() {
		out, err := exec.Command("bash", "../scripts/ensure-chromium.sh").Output()
		if err != nil {
			chromiumErr = fmt.Errorf("scripts/ensure-chromium.sh: %w", err)
			return
		}
		chromiumExec = strings.TrimSpace(string(out))
	})
	require.NoError(t, chromiumErr)
	return chromiumExec
}

// artifactPath is where a test keeps a file for people to look at after
// the run: $DBOS_TEST_ARTIFACTS, else build/test-artifacts at the
// repository root.
func artifactPath(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("DBOS_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "build", "test-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return filepath.Join(dir, name)
}

// newBrowser is a headless chromium tab, closed with the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests may run as root, where chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	return ctx
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// acceptDialogs accepts every confirm() the page opens (the page waits for
// it, and so does the Click that opened it, hence a goroutine of its own)
// and returns the messages asked so far.
func acceptDialogs(browser context.Context) func() []string {
	var dialogs []string
	var mu sync.Mutex
	opening := chromedp.Events(browser, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opening {
			if err != nil {
				return
			}
			mu.Lock()
			dialogs = append(dialogs, ev.Message)
			mu.Unlock()
			if _, err := chromedp.Call(browser, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), dialogs...)
	}
}

// tableRows are the cells' text of the rows of the table under sel.
func tableRows(t *testing.T, browser context.Context, sel string) [][]string {
	t.Helper()
	rows, err := chromedp.Run(browser, chromedp.Evaluate[[][]string](fmt.Sprintf(
		`[...document.querySelectorAll(%q)].map((tr) => [...tr.cells].map((td) => td.textContent.trim()))`, sel+" tbody tr")))
	require.NoError(t, err)
	return rows
}

// detailFields are the shown workflow's fields, by name.
func detailFields(t *testing.T, browser context.Context) map[string]string {
	t.Helper()
	fields, err := chromedp.Run(browser, chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll("#detail dt")].map((dt) => [dt.textContent, dt.nextElementSibling.textContent.trim()]))`))
	require.NoError(t, err)
	return fields
}

// saveScreenshot keeps the page as it is for people to look at.
func saveScreenshot(t *testing.T, browser context.Context, suffix string) {
	t.Helper()
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := artifactPath(t, "ui-"+unsafeFileChars.ReplaceAllString(t.Name(), "_")+suffix+".png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("dashboard screenshot: %s", path)
}

func TestDashboardShowsDecodedStepsAndCancelsFromThePage(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, agent)
		worker := e.startWorkerProcess(agent.socket, filepath.Join(e.dir, "effects"), true)
		c := dialClient(t, agent.socket)
		ctx := context.Background()
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-ui-done", Name: "steps_wf", Inputs: stepsInputs(t, 3, 0), Serialization: "portable_json",
		}, nil))
		require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-ui-done").Status)
		// A pickled input (DBOS Python's {'order': 7, 'items': ['x', 'y']}),
		// which the Go helper cannot read: the run fails, the page still
		// shows the input as Python would.
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-ui-pickle", Name: "steps_wf", Inputs: str("gASVIwAAAAAAAAB9lCiMBW9yZGVylEsHjAVpdGVtc5RdlCiMAXiUjAF5lGV1Lg=="), Serialization: "py_pickle",
		}, nil))
		require.Equal(t, "ERROR", awaitResult(t, c, "wf-ui-pickle").Status)
		// One that hangs after its second step, for the page to cancel.
		require.NoError(t, c.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
			WorkflowID: "wf-ui-hang", Name: "steps_wf", Inputs: stepsInputs(t, 5, 2), Serialization: "portable_json",
		}, nil))
		worker.out.waitFor(t, "recorded wf-ui-hang 2")

		browser := newBrowser(t)
		dialogs := acceptDialogs(browser)

		require.NoError(t, chromedp.Do(browser,
			chromedp.Navigate(base+"/ui/"),
			chromedp.WaitVisible(chromedp.CSS(`#workflows tr[data-id="wf-ui-done"]`)),
			chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-done"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#steps tbody tr.step:nth-child(3)`)),
		))
		detail, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#detail`)))
		require.NoError(t, err)
		output, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#steps tbody tr.step:nth-child(3) td.output`)))
		require.NoError(t, err)
		require.Contains(t, detail, "Workflow wf-ui-done")
		require.Contains(t, detail, "SUCCESS")
		require.Contains(t, detail, `{"steps":3,"block_after":0}`, "the input, decoded")
		require.Contains(t, detail, `{"steps":3}`, "the output, decoded")
		for _, step := range []string{"step-1", "step-2", "step-3"} {
			require.Contains(t, detail, step)
		}
		require.Equal(t, "9", strings.TrimSpace(output), "step 3's output, decoded")

		// The ID prefix filter keeps the pickled one alone.
		require.NoError(t, chromedp.Do(browser,
			chromedp.SendKeys(chromedp.CSS(`#filters input[name="prefix"]`), "wf-ui-pi"),
			chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelectorAll("#workflows tbody tr").length === 1 && document.querySelector("#workflows tbody tr").dataset.id === "wf-ui-pickle"`),
			chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-pickle"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-pickle"`),
		))
		pickled, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#detail`)))
		require.NoError(t, err)
		require.Contains(t, pickled, `{'order': 7, 'items': ['x', 'y']}`, "the pickled input, decoded")
		require.Contains(t, pickled, "ERROR")
		require.NoError(t, chromedp.Do(browser,
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#filters input[name="prefix"]').value = ""; document.querySelector("#filters").requestSubmit()`),
			chromedp.Poll[chromedp.Void](`document.querySelector('#workflows tr[data-id="wf-ui-hang"]') !== null`),
		))
		// Oldest first puts the first workflow the test ran at the top; a
		// creation bound before any of them, and a user nobody is, match
		// nothing; the bounds cleared, the list is whole again.
		require.NoError(t, chromedp.Do(browser,
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#filters select[name="order"]').value = "asc"; document.querySelector("#filters").requestSubmit()`),
			chromedp.Poll[chromedp.Void](`document.querySelector("#workflows tbody tr")?.dataset.id === "wf-ui-done"`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#filters input[name="created_before"]').value = "2000-01-01T00:00:00"; document.querySelector("#filters").requestSubmit()`),
			chromedp.Poll[chromedp.Void](`document.querySelector("#workflows tbody")?.textContent === "No workflows match."`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#filters input[name="created_before"]').value = ""; document.querySelector('#filters input[name="user"]').value = "nobody-at-all"; document.querySelector("#filters").requestSubmit()`),
			chromedp.Poll[chromedp.Void](`document.querySelector("#workflows tbody")?.textContent === "No workflows match."`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#filters input[name="user"]').value = ""; document.querySelector('#filters select[name="order"]').value = "desc"; document.querySelector("#filters").requestSubmit()`),
			chromedp.Poll[chromedp.Void](`document.querySelector("#workflows tbody tr")?.dataset.id === "wf-ui-hang"`),
		))

		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-hang"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-hang"`),
			chromedp.Click(chromedp.CSS(`#cancel`)),
			// The page reloads the workflow once the cancel is answered.
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail .status")?.textContent === "CANCELLED"`),
		))
		require.Equal(t, "CANCELLED", getWorkflow(t, c, "wf-ui-hang").Status, "the cancel took effect in the agent")

		// Resume from the page puts it back to run (the helper hangs in it
		// again).
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#resume`)),
			chromedp.Poll[chromedp.Void](`(s => s && s !== "CANCELLED")(document.querySelector("#detail .status")?.textContent)`),
		))
		require.Contains(t, []string{"ENQUEUED", "PENDING"}, getWorkflow(t, c, "wf-ui-hang").Status, "the resume took effect in the agent")
		require.Equal(t, []string{"Cancel workflow wf-ui-hang?", "Resume workflow wf-ui-hang?"}, dialogs(), "each action asked for confirmation")

		// Fork from the page: from step 2 of the finished one, under a
		// new UUID and the original's version (the fields left empty),
		// which the page then shows.
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-done"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-done"`),
			chromedp.SetValue(chromedp.CSS(`#fork-form input[name="start_step"]`), "2"),
			chromedp.Click(chromedp.CSS(`#fork`)),
			chromedp.Poll[chromedp.Void](`(h => h && h !== "Workflow wf-ui-done")(document.querySelector("#detail h2")?.textContent)`),
		))
		heading, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#detail h2`)))
		require.NoError(t, err)
		forkedID := strings.TrimPrefix(heading, "Workflow ")
		forked := getWorkflow(t, c, forkedID)
		require.Equal(t, "wf-ui-done", forked.ForkedFrom, "the fork took effect in the agent")
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, forkedID, "no id asked for: a new UUID")
		require.Equal(t, "SUCCESS", awaitResult(t, c, forkedID).Status)
		require.Len(t, listSteps(t, c, forkedID), 3)
		asked := dialogs()
		require.Len(t, asked, 3, "the fork asked for a confirmation: %q", asked)
		require.Equal(t, "Fork workflow wf-ui-done from step 2?", asked[2])

		// The other panes load from the agent too.
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`nav button[data-pane="queues"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#queues tbody tr`)),
		))
		queues, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#queues`)))
		require.NoError(t, err)
		require.Contains(t, queues, "Enqueued")
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`nav button[data-pane="workflows"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#detail`)),
		))

		saveScreenshot(t, browser, "")

		// The page itself is served without the token; its reads are not.
		require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/ui/app.js", "", "").status)
	})
}

func TestDashboardBehindTheAdminToken(t *testing.T) {
	e := newSQLiteEnv(t)
	tokenFile := filepath.Join(e.dir, "admin-token")
	const token = "ui-s3cret"
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0", "--admin-token-file", tokenFile}})
	base := adminURL(t, agent)
	e.startWorkerProcess(agent.socket, filepath.Join(e.dir, "effects"), false)
	c := dialClient(t, agent.socket)
	require.NoError(t, c.Call(context.Background(), protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "wf-ui-token", Name: "steps_wf", Inputs: stepsInputs(t, 1, 0), Serialization: "portable_json",
	}, nil))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-ui-token").Status)

	// The page holds no data and is served without the token; every read
	// it makes needs it.
	require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/ui/", "", "").status)
	require.Equal(t, http.StatusUnauthorized, adminCall(t, "GET", base+"/ui/api/workflows/wf-ui-token", "", "").status)
	require.Equal(t, http.StatusUnauthorized, adminCall(t, "GET", base+"/ui/api/queues", "", "").status)
	require.Equal(t, http.StatusOK, adminCall(t, "GET", base+"/ui/api/workflows/wf-ui-token", token, "").status)

	browser := newBrowser(t)
	require.NoError(t, chromedp.Do(browser,
		chromedp.Navigate(base+"/ui/"),
		chromedp.Poll[chromedp.Void](`document.querySelector("#message").textContent.includes("401")`),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		// The field applies the token when it changes (on leaving it).
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#token").dispatchEvent(new Event("change"))`),
		chromedp.WaitVisible(chromedp.CSS(`#workflows tr[data-id="wf-ui-token"]`)),
		chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#steps tbody tr.step`)),
	))
}

// TestDashboardShowsAWorkflowsChildEventMessagesAndStream: a workflow that
// starts a child, sets an event, receives one message (and leaves another
// unread) and writes a stream shows each in its pane, decoded; the child
// opens from its link; a fork from the page with a chosen id and version is
// exactly that workflow, run by that version; the schedules and versions
// panes show a schedule the test created and the versions its workers
// registered; with auto-refresh on, a new workflow appears in the list by
// itself.
func TestDashboardShowsAWorkflowsChildEventMessagesAndStream(t *testing.T) {
	onEachBackend(t, func(t *testing.T, e *env) {
		agent := e.startAgent(agentOptions{extraArgs: []string{"--admin-addr", "127.0.0.1:0"}})
		base := adminURL(t, agent)
		// "kid" says which version ran it.
		kid := func(version string) client.WorkflowFunc {
			return func(wf *client.Workflow, _ *string) (*string, error) {
				return wf.Step("count", func(context.Context) (*string, error) { return str(`"kid on ` + version + `"`), nil })
			}
		}
		family := func(wf *client.Workflow, _ *string) (*string, error) {
			if _, err := wf.Step("prepare", func(context.Context) (*string, error) { return str(`{"ready":true}`), nil }); err != nil {
				return nil, err
			}
			if _, err := wf.StartChild(protocol.StartWorkflow{Name: "kid", Inputs: str(`{"n":3}`)}); err != nil {
				return nil, err
			}
			if err := wf.SetEvent("progress", `{"stage": "child started"}`); err != nil {
				return nil, err
			}
			r, err := wf.Recv(str("greeting"), signalWait)
			if err != nil {
				return nil, err
			}
			if !r.Received {
				return nil, errors.New("no greeting")
			}
			for _, v := range []string{`"first line"`, `{"line": 2}`} {
				if err := wf.WriteStream("log", v); err != nil {
					return nil, err
				}
			}
			if err := wf.CloseStream("log"); err != nil {
				return nil, err
			}
			out := `{"greeted":` + *r.Message + `}`
			return &out, nil
		}
		qWorker(t, agent.socket, client.WorkerConfig{AppName: "ui-app", AppVersion: "ui-v1",
			Workflows: map[string]client.WorkflowFunc{"family": family, "kid": kid("ui-v1")}})
		qWorker(t, agent.socket, client.WorkerConfig{AppName: "ui-app", AppVersion: "ui-v2",
			Workflows: map[string]client.WorkflowFunc{"kid": kid("ui-v2")}})
		ctx := context.Background()
		dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := client.Dial(dialCtx, agent.socket, protocol.Hello{Role: protocol.RoleClient, AppName: "ui-app"})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })

		enqueue(t, c, protocol.StartWorkflow{WorkflowID: "wf-ui-family", Name: "family", Serialization: "portable_json", AppVersion: "ui-v1"})
		sendMessage(t, c, "wf-ui-family", "greeting", `"hello, family"`)
		sendMessage(t, c, "wf-ui-family", "later", `{"unread": true}`)
		res := awaitResult(t, c, "wf-ui-family")
		require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
		require.Equal(t, "SUCCESS", awaitResult(t, c, "wf-ui-family-2").Status)
		// Paused, so that it never fires within the test.
		require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{
			ScheduleName: "ui-nightly", WorkflowName: "kid", Cron: "30 2 * * *", CronTimezone: "Europe/Paris", Status: "PAUSED",
		}, nil))

		browser := newBrowser(t)
		dialogs := acceptDialogs(browser)
		require.NoError(t, chromedp.Do(browser,
			chromedp.Navigate(base+"/ui/"),
			chromedp.WaitVisible(chromedp.CSS(`#workflows tr[data-id="wf-ui-family"]`)),
			chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-family"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#children a[data-id="wf-ui-family-2"]`)),
		))
		fields := detailFields(t, browser)
		require.Equal(t, `{"greeted":"hello, family"}`, fields["Output"], "the output, decoded")
		require.Equal(t, "ui-v1", fields["Version"], "the version that ran it")
		require.Equal(t, "SUCCESS", fields["Status"])

		// Each pane against what the agent recorded: the step of the
		// child, of the event and of each stream write.
		stepOf := map[string][]string{}
		for _, s := range listSteps(t, c, "wf-ui-family") {
			stepOf[s.Name] = append(stepOf[s.Name], fmt.Sprint(s.FunctionID))
		}
		require.Len(t, stepOf["kid"], 1, "%v", stepOf)
		require.Len(t, stepOf[protocol.StepSetEvent], 1, "%v", stepOf)
		require.Len(t, stepOf[protocol.StepWriteStream], 2, "%v", stepOf)
		require.Len(t, stepOf[protocol.StepCloseStream], 1, "%v", stepOf)

		require.Equal(t, [][]string{{"wf-ui-family-2"}}, tableRows(t, browser, "#children"))
		stepChild, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#steps a[data-id="wf-ui-family-2"]`)))
		require.NoError(t, err)
		require.Equal(t, "wf-ui-family-2", stepChild, "the child's step links it too")
		require.Equal(t, [][]string{{"progress", stepOf[protocol.StepSetEvent][0], `{"stage":"child started"}`}}, tableRows(t, browser, "#events"))
		messages := tableRows(t, browser, "#messages")
		require.Len(t, messages, 2, "%q", messages)
		byTopic := map[string][]string{}
		for _, m := range messages {
			require.Len(t, m, 4, "%q", m)
			require.NotEmpty(t, m[1], "when it was sent")
			byTopic[m[0]] = []string{m[2], m[3]}
		}
		require.Equal(t, map[string][]string{
			"greeting": {"yes", `"hello, family"`},
			"later":    {"no", `{"unread":true}`},
		}, byTopic, "the received message consumed, the other pending, both decoded")
		require.Equal(t, [][]string{
			{"log", "0", stepOf[protocol.StepWriteStream][0], `"first line"`},
			{"log", "1", stepOf[protocol.StepWriteStream][1], `{"line":2}`},
			{"log", "2", stepOf[protocol.StepCloseStream][0], "(closed)"},
		}, tableRows(t, browser, "#streams"))
		saveScreenshot(t, browser, "-family")

		// The child opens from its link.
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#children a[data-id="wf-ui-family-2"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-family-2"`),
		))
		fields = detailFields(t, browser)
		require.Equal(t, "wf-ui-family", fields["Parent"])
		require.Equal(t, `{"n":3}`, fields["Input"], "the child's input, decoded")
		require.Equal(t, `"kid on ui-v1"`, fields["Output"], "the child's output, decoded")
		require.Equal(t, "ui-v1", fields["Version"])
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#detail dd a[data-id="wf-ui-family"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-family"`),
			chromedp.Click(chromedp.CSS(`#children a[data-id="wf-ui-family-2"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-family-2"`),
		))

		// Fork the child from the page under a chosen id, on the other
		// version: that worker runs it.
		require.NoError(t, chromedp.Do(browser,
			chromedp.SetValue(chromedp.CSS(`#fork-form input[name="new_workflow_id"]`), "wf-ui-kid-fork"),
			chromedp.SetValue(chromedp.CSS(`#fork-form input[name="application_version"]`), "ui-v2"),
			chromedp.Click(chromedp.CSS(`#fork`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-kid-fork"`),
		))
		require.Equal(t, []string{"Fork workflow wf-ui-family-2 from step 1 as wf-ui-kid-fork on version ui-v2?"}, dialogs())
		res = awaitResult(t, c, "wf-ui-kid-fork")
		require.Equal(t, "SUCCESS", res.Status, "%v", res.Error)
		require.Equal(t, `"kid on ui-v2"`, *res.Output, "the version asked for ran it")
		forked := getWorkflow(t, c, "wf-ui-kid-fork")
		require.Equal(t, "ui-v2", forked.AppVersion)
		require.Equal(t, "wf-ui-family-2", forked.ForkedFrom)
		require.Equal(t, "kid", forked.Name)
		message, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#message`)))
		require.NoError(t, err)
		require.Equal(t, "forked wf-ui-family-2 as wf-ui-kid-fork", message)
		fields = detailFields(t, browser)
		require.Equal(t, "ui-v2", fields["Version"], "the page shows the fork on its version")
		require.Equal(t, "wf-ui-family-2", fields["Forked from"])

		// The schedule the test created and the versions its workers
		// registered.
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`nav button[data-pane="schedules"]`)),
			chromedp.Poll[chromedp.Void](`[...document.querySelectorAll("#schedules tbody td")].some((td) => td.textContent === "ui-nightly")`),
		))
		require.Equal(t, [][]string{{"ui-nightly", "kid", "30 2 * * *", "Europe/Paris", "PAUSED", ""}}, tableRows(t, browser, "#schedules"))
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`nav button[data-pane="versions"]`)),
			chromedp.Poll[chromedp.Void](`[...document.querySelectorAll("#versions tbody td")].some((td) => td.textContent === "ui-v1")`),
		))
		versions := map[string]string{}
		for _, v := range tableRows(t, browser, "#versions") {
			require.Len(t, v, 4, "%q", v)
			require.NotEmpty(t, v[2], "its timestamp")
			versions[v[0]] = v[1]
		}
		require.Equal(t, map[string]string{"ui-v1": "ui-app", "ui-v2": "ui-app"}, versions)

		// Auto-refresh: a workflow started after the list loaded appears
		// in it with nothing clicked.
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`nav button[data-pane="workflows"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#workflows tr[data-id="wf-ui-kid-fork"]`)),
			chromedp.Click(chromedp.CSS(`#auto-refresh`)),
		))
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: "wf-ui-late", Name: "kid", Serialization: "portable_json", AppVersion: "ui-v1"})
		require.NoError(t, chromedp.Do(browser,
			chromedp.WaitVisible(chromedp.CSS(`#workflows tr[data-id="wf-ui-late"]`)),
		))
	})
}
