package admin

import (
	"encoding/json"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// workflowStatus is a workflow as DBOS's admin server answers it: the
// fields of DBOS's WorkflowStatus, instants in epoch milliseconds. Inputs,
// output and error are the stored serialized text (DBOS Python answers them
// deserialized; the agent does not run the application's deserializer), with
// serialization saying how to read them.
type workflowStatus struct {
	WorkflowID              string   `json:"workflow_id"`
	Status                  string   `json:"status"`
	Name                    string   `json:"name"`
	ClassName               *string  `json:"class_name"`
	ConfigName              *string  `json:"config_name"`
	AuthenticatedUser       *string  `json:"authenticated_user"`
	AssumedRole             *string  `json:"assumed_role"`
	AuthenticatedRoles      []string `json:"authenticated_roles"`
	Input                   *string  `json:"input"`
	Output                  *string  `json:"output"`
	Error                   *string  `json:"error"`
	CreatedAt               int64    `json:"created_at"`
	UpdatedAt               int64    `json:"updated_at"`
	QueueName               *string  `json:"queue_name"`
	ExecutorID              *string  `json:"executor_id"`
	AppVersion              *string  `json:"app_version"`
	AppID                   *string  `json:"app_id"`
	RecoveryAttempts        int64    `json:"recovery_attempts"`
	WorkflowTimeoutMS       *int64   `json:"workflow_timeout_ms"`
	WorkflowDeadlineEpochMS *int64   `json:"workflow_deadline_epoch_ms"`
	DeduplicationID         *string  `json:"deduplication_id"`
	Priority                int      `json:"priority"`
	QueuePartitionKey       *string  `json:"queue_partition_key"`
	ForkedFrom              *string  `json:"forked_from"`
	ParentWorkflowID        *string  `json:"parent_workflow_id"`
	DequeuedAt              *int64   `json:"dequeued_at"`
	CompletedAt             *int64   `json:"completed_at"`
	Serialization           *string  `json:"serialization"`
}

func statusOf(w sysdb.Workflow) workflowStatus {
	s := workflowStatus{
		WorkflowID: w.ID, Status: w.Status, Name: w.Name, ClassName: w.ClassName, ConfigName: w.ConfigName,
		AuthenticatedUser: w.AuthenticatedUser, AssumedRole: w.AssumedRole,
		Input: w.Inputs, Output: w.Output, Error: w.Error,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, QueueName: w.QueueName, ExecutorID: w.ExecutorID,
		AppVersion: w.ApplicationVersion, AppID: w.ApplicationID, RecoveryAttempts: w.RecoveryAttempts,
		WorkflowTimeoutMS: w.TimeoutMS, WorkflowDeadlineEpochMS: w.DeadlineEpochMS,
		DeduplicationID: w.DeduplicationID, Priority: w.Priority, QueuePartitionKey: w.QueuePartitionKey,
		ForkedFrom: w.ForkedFrom, ParentWorkflowID: w.ParentWorkflowID, DequeuedAt: w.StartedAt,
		CompletedAt: w.CompletedAt, Serialization: w.Serialization,
	}
	// The roles are stored as a JSON list; text that is not one is dropped
	// rather than failing the listing.
	if w.AuthenticatedRoles != nil {
		_ = json.Unmarshal([]byte(*w.AuthenticatedRoles), &s.AuthenticatedRoles)
	}
	return s
}

// stepInfo is a step as DBOS's admin server answers it (DBOS's StepInfo).
type stepInfo struct {
	FunctionID         int     `json:"function_id"`
	FunctionName       string  `json:"function_name"`
	Output             *string `json:"output"`
	Error              *string `json:"error"`
	ChildWorkflowID    *string `json:"child_workflow_id"`
	StartedAtEpochMS   *int64  `json:"started_at_epoch_ms"`
	CompletedAtEpochMS *int64  `json:"completed_at_epoch_ms"`
	Serialization      *string `json:"serialization"`
}

func stepOf(s sysdb.Step) stepInfo {
	return stepInfo{
		FunctionID: s.FunctionID, FunctionName: s.Name, Output: s.Output, Error: s.Error,
		ChildWorkflowID: s.ChildWorkflowID, StartedAtEpochMS: s.StartedAt, CompletedAtEpochMS: s.CompletedAt,
		Serialization: s.Serialization,
	}
}
