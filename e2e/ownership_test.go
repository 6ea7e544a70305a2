package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/client"
	"github.com/dbos-agent/dbos-agent/protocol"
)

// dialApp opens a client connection of application app ("" for none).
func dialApp(t *testing.T, socket, app string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, protocol.Hello{Role: protocol.RoleClient, AppName: app})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// queueOwners lists the queues list_queues returns for these applications,
// each with its owner.
func queueOwners(t *testing.T, c *client.Client, apps ...string) map[string]string {
	t.Helper()
	var reply protocol.ListQueuesReply
	require.NoError(t, c.Call(context.Background(), protocol.OpListQueues, &protocol.ListQueues{ApplicationNames: apps}, &reply))
	out := map[string]string{}
	for _, q := range reply.Queues {
		out[q.Name] = q.ApplicationName
	}
	return out
}

// scheduleOwners lists the schedules list_schedules returns, with their
// owners.
func scheduleOwners(t *testing.T, c *client.Client, m protocol.ListSchedules) map[string]string {
	t.Helper()
	var reply protocol.ListSchedulesReply
	require.NoError(t, c.Call(context.Background(), protocol.OpListSchedules, &m, &reply))
	out := map[string]string{}
	for _, s := range reply.Schedules {
		require.NotEmpty(t, s.ScheduleID, "a listed schedule carries its row's id")
		out[s.ScheduleName] = s.ApplicationName
	}
	return out
}

// TestActingForAnotherApplication: the calls of DBOS 3.4 that take an
// application_name act for that application through the agent. Listings
// take its rows and the unclaimed ones; a client writes rows it owns
// (a schedule, a debounced workflow) and promotes its versions; a worker
// may not create another application's schedule.
func TestActingForAnotherApplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	ctx := context.Background()
	shop := dialApp(t, a.socket, "shop")
	nameless := dialApp(t, a.socket, "")

	register := func(c *client.Client, queue, app string) {
		t.Helper()
		require.NoError(t, c.Call(ctx, protocol.OpRegisterQueues, &protocol.RegisterQueues{
			Queues: []protocol.QueueRegistration{{Name: queue, Concurrency: intp(3)}}, ApplicationName: app,
		}, nil))
	}
	register(shop, "own-q-shop", "")
	register(shop, "own-q-bank", "bank")
	register(nameless, "own-q-free", "")

	// Queues: every one unfiltered; a named application's and the unclaimed.
	all := queueOwners(t, shop)
	require.Equal(t, "shop", all["own-q-shop"])
	require.Equal(t, "bank", all["own-q-bank"])
	require.Contains(t, all, "own-q-free")
	require.Equal(t, "", all["own-q-free"], "registered by a connection with no application: unclaimed")
	bank := queueOwners(t, shop, "bank")
	require.NotContains(t, bank, "own-q-shop")
	require.Equal(t, "bank", bank["own-q-bank"])
	require.Contains(t, bank, "own-q-free")

	// Schedules: a client writes one for another application.
	create := func(c *client.Client, name, app string) error {
		return c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{
			ScheduleName: name, WorkflowName: "report", Cron: "0 3 * * *", ApplicationName: app,
		}, nil)
	}
	require.NoError(t, create(shop, "own-s-shop", ""))
	require.NoError(t, create(shop, "own-s-bank", "bank"))
	require.NoError(t, create(nameless, "own-s-free", ""))
	require.Equal(t, map[string]string{"own-s-shop": "shop", "own-s-free": ""}, scheduleOwners(t, shop, protocol.ListSchedules{}),
		"unset: the caller's application's and the unclaimed")
	require.Equal(t, map[string]string{"own-s-bank": "bank", "own-s-free": ""},
		scheduleOwners(t, shop, protocol.ListSchedules{ApplicationNames: []string{"bank"}}))
	require.Len(t, scheduleOwners(t, shop, protocol.ListSchedules{AllApplications: true}), 3)
	w := qWorker(t, a.socket, client.WorkerConfig{AppName: "shop", AppVersion: "s1",
		Workflows: map[string]client.WorkflowFunc{"noop": func(*client.Workflow, *string) (*string, error) { return nil, nil }}})
	perr := requireErrCode(t, create(w.Client, "own-s-w", "bank"), protocol.CodeInvalidArgument)
	require.Contains(t, perr.Message, "own application only")

	// Versions: bank's version is promoted only by acting for bank.
	bankWorker := qWorker(t, a.socket, client.WorkerConfig{AppName: "bank", AppVersion: "b1",
		Workflows: map[string]client.WorkflowFunc{"noop": func(*client.Workflow, *string) (*string, error) { return nil, nil }}})
	require.Equal(t, "b1", bankWorker.Client.Hello.AppVersion)
	err := shop.Call(ctx, protocol.OpPromoteVersion, &protocol.VersionRef{VersionName: "b1"}, nil)
	require.Contains(t, requireErrCode(t, err, protocol.CodeInvalidArgument).Message, "bank")
	require.NoError(t, shop.Call(ctx, protocol.OpPromoteVersion, &protocol.VersionRef{VersionName: "b1", ApplicationName: "bank"}, nil))
	var versions protocol.ListVersionsReply
	require.NoError(t, nameless.Call(ctx, protocol.OpListVersions, protocol.Empty{}, &versions))
	owners := map[string]string{}
	for _, v := range versions.Versions {
		owners[v.VersionName] = v.ApplicationName
	}
	require.Equal(t, map[string]string{"b1": "bank", "s1": "shop"}, owners)

	// Debounce: the workflow is bank's, with no version of the caller's.
	var deb protocol.DebounceWorkflowReply
	require.NoError(t, shop.Call(ctx, protocol.OpDebounceWorkflow, &protocol.DebounceWorkflow{
		Key: "k", Name: "report", QueueName: "own-q-bank", DelayMS: 3_600_000, Inputs: str(`[]`), Serialization: "portable_json",
		WorkflowID: "own-deb", ApplicationName: "bank",
	}, &deb))
	info := getWorkflow(t, shop, deb.WorkflowID)
	require.Equal(t, "bank", info.AppName)
	require.Equal(t, "", info.AppVersion)
	require.NoError(t, shop.Call(ctx, protocol.OpDebounceWorkflow, &protocol.DebounceWorkflow{
		Key: "k", Name: "report", QueueName: "own-q-bank", DelayMS: 3_600_000, Inputs: str(`[1]`), Serialization: "portable_json",
		ApplicationName: "bank",
	}, &deb))
	require.Equal(t, protocol.DebounceWorkflowReply{WorkflowID: "own-deb", Bounced: true}, deb, "bank's pending debounce is bounced")
}

// TestRenameApplication: rename_application moves an application's rows in
// every owned table and reports the counts, adopts unclaimed rows only when
// asked, leaves a peer's alone, and refuses a name no application could
// launch under.
func TestRenameApplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.startAgent(agentOptions{})
	ctx := context.Background()
	c := dialApp(t, a.socket, "")
	w := qWorker(t, a.socket, client.WorkerConfig{AppName: "old-app", AppVersion: "o1",
		Queues: []protocol.QueueRegistration{{Name: "ren-q"}},
		Workflows: map[string]client.WorkflowFunc{"done": func(wf *client.Workflow, _ *string) (*string, error) {
			return wf.Step("step", func(context.Context) (*string, error) { return str("1"), nil })
		}}})
	var started protocol.StartWorkflowReply
	require.NoError(t, w.Client.Call(ctx, protocol.OpStartWorkflow, &protocol.StartWorkflow{
		WorkflowID: "ren-done", Name: "done", QueueName: "ren-q", Inputs: str(`[]`), Serialization: "portable_json",
	}, &started))
	require.Equal(t, "SUCCESS", awaitResult(t, c, "ren-done").Status)
	require.NoError(t, c.Call(ctx, protocol.OpCreateSchedule, &protocol.Schedule{
		ScheduleName: "ren-s", WorkflowName: "done", Cron: "0 3 * * *", ApplicationName: "old-app",
	}, nil))
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "ren-free", Name: "done", QueueName: "unserved", ApplicationName: "", Inputs: str(`[]`), Serialization: "portable_json"})
	enqueue(t, c, protocol.StartWorkflow{WorkflowID: "ren-peer", Name: "done", QueueName: "unserved", ApplicationName: "peer-app", Inputs: str(`[]`), Serialization: "portable_json"})
	w.Close()
	<-w.Client.Done()

	rename := func(m protocol.RenameApplication) (protocol.RenameApplicationReply, error) {
		var reply protocol.RenameApplicationReply
		err := c.Call(ctx, protocol.OpRenameApplication, &m, &reply)
		return reply, err
	}
	moved, err := rename(protocol.RenameApplication{OldName: "old-app", NewName: "new-app", BatchSize: 1})
	require.NoError(t, err)
	require.Equal(t, protocol.RenameApplicationReply{Queues: 1, Schedules: 1, Versions: 1, Workflows: 1, Steps: 1}, moved)
	require.Equal(t, "new-app", getWorkflow(t, c, "ren-done").AppName)
	require.Equal(t, "", getWorkflow(t, c, "ren-free").AppName, "unclaimed rows move only when asked")
	require.Equal(t, "peer-app", getWorkflow(t, c, "ren-peer").AppName)
	require.Equal(t, "new-app", queueOwners(t, c)["ren-q"])
	require.Equal(t, map[string]string{"ren-s": "new-app"}, scheduleOwners(t, c, protocol.ListSchedules{ApplicationNames: []string{"new-app"}}))

	again, err := rename(protocol.RenameApplication{OldName: "old-app", NewName: "new-app"})
	require.NoError(t, err)
	require.Equal(t, protocol.RenameApplicationReply{}, again, "nothing left: a re-run is harmless")

	adopted, err := rename(protocol.RenameApplication{NewName: "adopter", AdoptUnclaimedRows: true})
	require.NoError(t, err)
	require.Equal(t, int64(1), adopted.Workflows)
	require.Equal(t, "adopter", getWorkflow(t, c, "ren-free").AppName)
	require.Equal(t, "new-app", getWorkflow(t, c, "ren-done").AppName)

	for _, bad := range []protocol.RenameApplication{
		{NewName: "adopter"}, {OldName: "new-app", NewName: "ab"}, {OldName: "new-app", NewName: "No Spaces"},
		{OldName: "new-app", NewName: "new-app"}, {OldName: "new-app", NewName: "fine", BatchSize: -1},
	} {
		_, err := rename(bad)
		requireErrCode(t, err, protocol.CodeInvalidArgument)
	}
	require.Equal(t, "new-app", getWorkflow(t, c, "ren-done").AppName, "a refused rename writes nothing")
}
