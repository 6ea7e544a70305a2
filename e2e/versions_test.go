package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// versionWorkers starts workers of application "e2e" serving queue "rq"
// with one workflow, "routed", that reports which worker ran it.
type versionWorkers struct {
	t      *testing.T
	socket string
	ranBy  chan [2]string // worker label, workflow id
}

func newVersionWorkers(t *testing.T, socket string) *versionWorkers {
	return &versionWorkers{t: t, socket: socket, ranBy: make(chan [2]string, 64)}
}

func (v *versionWorkers) start(label, version string) *client.Worker {
	return qWorker(v.t, v.socket, client.WorkerConfig{AppName: "e2e", AppVersion: version,
		Queues: []protocol.QueueRegistration{{Name: "rq"}},
		Workflows: map[string]client.WorkflowFunc{"routed": func(wf *client.Workflow, _ *string) (*string, error) {
			v.ranBy <- [2]string{label, wf.ID()}
			return str(label), nil
		}}})
}

func (v *versionWorkers) requireRanBy(c *client.Client, id, label string) {
	v.t.Helper()
	require.Equal(v.t, "SUCCESS", awaitResult(v.t, c, id).Status)
	require.Equal(v.t, [2]string{label, id}, recv(v.t, v.ranBy, "a run"))
}

// TestWorkerWithoutVersionIsNoWildcard: the routing rule of PROTOCOL.md
// 2.13. A worker that announces no version (and gets none from the agent)
// takes unversioned work only while its application has no registered
// version; once v2 is registered, unversioned work is v2's alone, even
// while the version-less worker is the only one connected. (Before, a
// version-less worker took unversioned work whatever the latest was.)
func TestWorkerWithoutVersionIsNoWildcard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	clock := startClock(t, a.socket)
	w := newVersionWorkers(t, a.socket)
	c := dialClient(t, a.socket)

	none := w.start("none", "")
	require.Equal(t, "", none.Client.Hello.AppVersion, "no version, none from the agent")
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "n-0", Name: "routed", QueueName: "rq"})
	w.requireRanBy(c, "n-0", "none")
	require.Equal(t, "", getWorkflow(t, c, "n-0").AppVersion, "run by no version, it stays unversioned")

	v2 := w.start("v2", "v2")
	for i := 1; i <= 6; i++ {
		enqueue(t, c, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("n-%d", i), Name: "routed", QueueName: "rq"})
	}
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("n-%d", i)
		require.Equal(t, "SUCCESS", awaitResult(t, c, id).Status)
		require.Equal(t, "v2", getWorkflow(t, c, id).AppVersion)
	}
	for i := 1; i <= 6; i++ {
		require.Equal(t, "v2", recv(t, w.ranBy, "a run")[0], "only the latest version takes unversioned work")
	}

	// With v2 gone, the version-less worker still takes none of it.
	v2.Close()
	<-v2.Client.Done()
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "n-7", Name: "routed", QueueName: "rq"})
	clock.waitTicks(t, 2)
	require.Equal(t, "ENQUEUED", getWorkflow(t, c, "n-7").Status)
	require.Empty(t, w.ranBy)
	// A version-less worker that connects now is told why in the log.
	w.start("none-2", "")
	a.waitForLog(t, "a worker without an application version takes no queued unversioned work")
	w.start("v2-again", "v2")
	w.requireRanBy(c, "n-7", "v2-again")

	// It still runs what it starts itself, and its enqueues are
	// unversioned: the latest version's.
	reply, err := none.Start(context.Background(), protocol.StartWorkflow{WorkflowID: "own", Name: "routed"})
	require.NoError(t, err)
	require.NotNil(t, reply.Run, "a direct start runs in the worker that made it")
	w.requireRanBy(c, "own", "none")
}

// TestAgentAppVersionAppliesToWorkersThatAnnounceNone: the agent's
// --app-version is the version of a worker that announces none: the reply
// says so, the version is registered, and it takes unversioned work.
func TestAgentAppVersionAppliesToWorkersThatAnnounceNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{extraArgs: []string{"--app-version", "v3"}})
	w := newVersionWorkers(t, a.socket)
	c := dialClient(t, a.socket)
	worker := w.start("default", "")
	require.Equal(t, "v3", worker.Client.Hello.AppVersion)
	var versions protocol.ListVersionsReply
	require.NoError(t, c.Call(context.Background(), protocol.OpListVersions, &protocol.Empty{}, &versions))
	require.Len(t, versions.Versions, 1)
	require.Equal(t, "v3", versions.Versions[0].VersionName)

	// The client announced no version either: its enqueue is v3's.
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "d-1", Name: "routed", QueueName: "rq"})
	w.requireRanBy(c, "d-1", "default")
	require.Equal(t, "v3", getWorkflow(t, c, "d-1").AppVersion)
	// An unversioned row (as an SDK client writes it) goes to the latest, v3.
	_, err := e.commSQL().Exec(context.Background(), "INSERT INTO "+e.commTable("workflow_status")+
		" (workflow_uuid, status, name, queue_name, application_name) VALUES ('d-2', 'ENQUEUED', 'routed', 'rq', 'e2e')")
	require.NoError(t, err)
	w.requireRanBy(c, "d-2", "default")
	require.Equal(t, "v3", getWorkflow(t, c, "d-2").AppVersion, "claimed by v3, it is v3's")
}

// TestWorkerWithoutAppName: what PROTOCOL.md section 6 says a worker that
// announces no app_name (and no app_version, with no --app-version) is
// given. It is no application: its dispatch filters on none, so it takes
// the rows of every application and of none (here "shop"'s and a nameless
// client's), by the routing rule of 2.13 with the latest version taken
// over every application's versions. Claiming leaves a row's application
// as it was. Once any application registers a version, it takes no
// unversioned work (it still runs what it starts itself).
func TestWorkerWithoutAppName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	clock := startClock(t, a.socket)
	ctx := context.Background()
	ranBy := make(chan string, 16)
	connect := func(app, version string) *client.Worker {
		w, err := client.NewWorker(ctx, a.socket, client.WorkerConfig{AppName: app, AppVersion: version,
			Queues: []protocol.QueueRegistration{{Name: "nq"}},
			Workflows: map[string]client.WorkflowFunc{"routed": func(wf *client.Workflow, _ *string) (*string, error) {
				ranBy <- app + " " + wf.ID()
				return str(app), nil
			}}})
		require.NoError(t, err)
		t.Cleanup(func() { w.Close() })
		return w
	}
	nameless := connect("", "")
	require.Equal(t, "", nameless.Client.Hello.AppVersion, "no version, none from the agent")

	shop, err := client.Dial(ctx, a.socket, protocol.Hello{MinVersion: 1, AppName: "shop"})
	require.NoError(t, err)
	t.Cleanup(func() { shop.Close() })
	anon, err := client.Dial(ctx, a.socket, protocol.Hello{MinVersion: 1})
	require.NoError(t, err)
	t.Cleanup(func() { anon.Close() })

	enqueue(t, shop, protocol.StartWorkflow{WorkflowID: "shop-1", Name: "routed", QueueName: "nq"})
	require.Equal(t, " shop-1", recv(t, ranBy, "a run"))
	enqueue(t, anon, protocol.StartWorkflow{WorkflowID: "anon-1", Name: "routed", QueueName: "nq"})
	require.Equal(t, " anon-1", recv(t, ranBy, "a run"))
	for id, app := range map[string]string{"shop-1": "shop", "anon-1": ""} {
		// The run reports before its outcome is written: wait for the outcome.
		require.Equal(t, "SUCCESS", awaitResult(t, shop, id).Status)
		info := getWorkflow(t, shop, id)
		require.Equal(t, app, info.AppName, "claiming leaves the row's application as it was")
		require.Equal(t, "", info.AppVersion, "unversioned, and it stays so")
	}

	// Another application registers a version (a worker of it serving
	// another queue): the nameless worker's latest is now that version, so
	// unversioned rows wait for a worker of the latest version.
	other, err := client.NewWorker(ctx, a.socket, client.WorkerConfig{AppName: "other", AppVersion: "v1",
		Queues: []protocol.QueueRegistration{{Name: "oq"}}, Workflows: map[string]client.WorkflowFunc{}})
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	enqueue(t, shop, protocol.StartWorkflow{WorkflowID: "shop-2", Name: "routed", QueueName: "nq"})
	clock.waitTicks(t, 2)
	require.Equal(t, "ENQUEUED", getWorkflow(t, shop, "shop-2").Status)
	require.Empty(t, ranBy)

	// What it starts itself with run_here it still runs; the row has no
	// application and no version.
	reply, err := nameless.Start(ctx, protocol.StartWorkflow{WorkflowID: "own", Name: "routed"})
	require.NoError(t, err)
	require.NotNil(t, reply.Run)
	require.Equal(t, " own", recv(t, ranBy, "a run"))
	info := getWorkflow(t, shop, "own")
	require.Equal(t, "", info.AppName)
	require.Equal(t, "", info.AppVersion)
}
