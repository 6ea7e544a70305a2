package e2e

import (
	"context"
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
		// The page waits for its confirm(), and so does the Click that
		// opened it: a second goroutine accepts each dialog.
		var dialogs []string
		var dialogsMu sync.Mutex
		opening := chromedp.Events(browser, page.JavascriptDialogOpening)
		go func() {
			for ev, err := range opening {
				if err != nil {
					return
				}
				dialogsMu.Lock()
				dialogs = append(dialogs, ev.Message)
				dialogsMu.Unlock()
				answer := page.HandleJavaScriptDialogParams{Accept: true}
				if ev.Type == page.DialogTypePrompt {
					answer.PromptText = "2" // fork's start step
				}
				if _, err := chromedp.Call(browser, page.HandleJavaScriptDialog, answer); err != nil {
					return
				}
			}
		}()

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

		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-hang"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-hang"`),
			chromedp.Click(chromedp.CSS(`#cancel`)),
			// The page reloads the workflow once the cancel is answered.
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail .status")?.textContent === "CANCELLED"`),
		))
		got := decodeAdmin[map[string]any](t, adminCall(t, "GET", base+"/workflows/wf-ui-hang", "", ""))
		require.Equal(t, "CANCELLED", got["status"], "the cancel took effect in the agent")

		// Resume from the page puts it back to run (the helper hangs in it
		// again).
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#resume`)),
			chromedp.Poll[chromedp.Void](`(s => s && s !== "CANCELLED")(document.querySelector("#detail .status")?.textContent)`),
		))
		got = decodeAdmin[map[string]any](t, adminCall(t, "GET", base+"/workflows/wf-ui-hang", "", ""))
		require.Contains(t, []any{"ENQUEUED", "PENDING"}, got["status"], "the resume took effect in the agent")
		dialogsMu.Lock()
		require.Equal(t, []string{"Cancel workflow wf-ui-hang?", "Resume workflow wf-ui-hang?"}, dialogs, "each action asked for confirmation")
		dialogsMu.Unlock()

		// Fork from the page: from step 2 of the finished one, which the
		// page then shows.
		require.NoError(t, chromedp.Do(browser,
			chromedp.Click(chromedp.CSS(`#workflows tr[data-id="wf-ui-done"]`)),
			chromedp.Poll[chromedp.Void](`document.querySelector("#detail h2")?.textContent === "Workflow wf-ui-done"`),
			chromedp.Click(chromedp.CSS(`#fork`)),
			chromedp.Poll[chromedp.Void](`(h => h && h !== "Workflow wf-ui-done")(document.querySelector("#detail h2")?.textContent)`),
		))
		heading, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#detail h2`)))
		require.NoError(t, err)
		forkedID := strings.TrimPrefix(heading, "Workflow ")
		forked := decodeAdmin[map[string]any](t, adminCall(t, "GET", base+"/workflows/"+forkedID, "", ""))
		require.Equal(t, "wf-ui-done", forked["forked_from"], "the fork took effect in the agent")
		dialogsMu.Lock()
		require.Len(t, dialogs, 4, "the fork asked for its start step and a confirmation: %q", dialogs)
		require.Equal(t, "Fork workflow wf-ui-done from step 2?", dialogs[3])
		dialogsMu.Unlock()

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

		shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		path := artifactPath(t, "ui-"+unsafeFileChars.ReplaceAllString(t.Name(), "_")+".png")
		require.NoError(t, os.WriteFile(path, shot, 0o644))
		t.Logf("dashboard screenshot: %s", path)

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
