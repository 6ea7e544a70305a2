package admin

import (
	"strconv"

	"github.com/dbos-agent/dbos-agent/internal/values"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// workflowOutput is a workflow as DBOS's admin server answered it (DBOS
// Python's last admin server, 2.31, and DBOS Go's, 1.3: the WorkflowsOutput
// of DBOS Conductor's protocol): every field a string or null, instants
// and numbers as decimal text, inputs, output and error as Python's str()
// of the deserialized value (values.PythonStr), attributes as JSON text.
type workflowOutput struct {
	WorkflowUUID            string  `json:"WorkflowUUID"`
	Status                  *string `json:"Status"`
	WorkflowName            *string `json:"WorkflowName"`
	WorkflowClassName       *string `json:"WorkflowClassName"`
	WorkflowConfigName      *string `json:"WorkflowConfigName"`
	AuthenticatedUser       *string `json:"AuthenticatedUser"`
	AssumedRole             *string `json:"AssumedRole"`
	AuthenticatedRoles      *string `json:"AuthenticatedRoles"`
	Input                   *string `json:"Input"`
	Output                  *string `json:"Output"`
	Error                   *string `json:"Error"`
	CreatedAt               *string `json:"CreatedAt"`
	UpdatedAt               *string `json:"UpdatedAt"`
	QueueName               *string `json:"QueueName"`
	ApplicationVersion      *string `json:"ApplicationVersion"`
	ExecutorID              *string `json:"ExecutorID"`
	WorkflowTimeoutMS       *string `json:"WorkflowTimeoutMS"`
	WorkflowDeadlineEpochMS *string `json:"WorkflowDeadlineEpochMS"`
	DeduplicationID         *string `json:"DeduplicationID"`
	Priority                *string `json:"Priority"`
	QueuePartitionKey       *string `json:"QueuePartitionKey"`
	ForkedFrom              *string `json:"ForkedFrom"`
	WasForkedFrom           bool    `json:"WasForkedFrom"`
	ParentWorkflowID        *string `json:"ParentWorkflowID"`
	DequeuedAt              *string `json:"DequeuedAt"`
	DelayUntilEpochMS       *string `json:"DelayUntilEpochMS"`
	CompletedAt             *string `json:"CompletedAt"`
	Attributes              *string `json:"Attributes"`
	ScheduleName            *string `json:"ScheduleName"`
	ApplicationName         *string `json:"ApplicationName"`
}

func text(s string) *string { return &s }

func decimal(n int64) *string { return text(strconv.FormatInt(n, 10)) }

func optionalDecimal(n *int64) *string {
	if n == nil {
		return nil
	}
	return decimal(*n)
}

// shown is a stored value as DBOS's admin server showed it, nil when none
// is stored.
func shown(kind values.Kind, serialization, stored *string) *string {
	if stored == nil {
		return nil
	}
	return text(values.PythonStr(kind, serialization, *stored))
}

func outputOf(w sysdb.Workflow) workflowOutput {
	o := workflowOutput{
		WorkflowUUID: w.ID, Status: text(w.Status), WorkflowName: text(w.Name),
		WorkflowClassName: w.ClassName, WorkflowConfigName: w.ConfigName,
		AuthenticatedUser: w.AuthenticatedUser, AssumedRole: w.AssumedRole,
		Input:     shown(values.KindInputs, w.Serialization, w.Inputs),
		Output:    shown(values.KindValue, w.Serialization, w.Output),
		Error:     shown(values.KindError, w.Serialization, w.Error),
		CreatedAt: decimal(w.CreatedAt), UpdatedAt: decimal(w.UpdatedAt),
		QueueName: w.QueueName, ApplicationVersion: w.ApplicationVersion, ExecutorID: w.ExecutorID,
		WorkflowTimeoutMS: optionalDecimal(w.TimeoutMS), WorkflowDeadlineEpochMS: optionalDecimal(w.DeadlineEpochMS),
		DeduplicationID: w.DeduplicationID, Priority: decimal(int64(w.Priority)),
		QueuePartitionKey: w.QueuePartitionKey, ForkedFrom: w.ForkedFrom, WasForkedFrom: w.WasForkedFrom,
		ParentWorkflowID: w.ParentWorkflowID, DequeuedAt: optionalDecimal(w.StartedAt),
		DelayUntilEpochMS: optionalDecimal(w.DelayUntilEpochMS), CompletedAt: optionalDecimal(w.CompletedAt),
		ScheduleName: w.ScheduleName, ApplicationName: w.ApplicationName,
	}
	if w.Attributes != nil {
		if dumped, ok := values.PythonJSONDumps(*w.Attributes); ok {
			o.Attributes = &dumped
		}
	}
	// DBOS shows the roles as str() of the list it stores as JSON.
	if w.AuthenticatedRoles != nil {
		o.AuthenticatedRoles = text(values.PythonStr(values.KindValue, text(values.PortableJSON), *w.AuthenticatedRoles))
	}
	return o
}

// workflowStep is a step as DBOS's admin server answered it (Conductor's
// WorkflowSteps): output and error as str() of the value, instants as
// decimal text.
type workflowStep struct {
	FunctionID         int     `json:"function_id"`
	FunctionName       string  `json:"function_name"`
	Output             *string `json:"output"`
	Error              *string `json:"error"`
	ChildWorkflowID    *string `json:"child_workflow_id"`
	StartedAtEpochMS   *string `json:"started_at_epoch_ms"`
	CompletedAtEpochMS *string `json:"completed_at_epoch_ms"`
}

func stepOf(s sysdb.Step) workflowStep {
	return workflowStep{
		FunctionID: s.FunctionID, FunctionName: s.Name,
		Output:          shown(values.KindValue, s.Serialization, s.Output),
		Error:           shown(values.KindError, s.Serialization, s.Error),
		ChildWorkflowID: s.ChildWorkflowID, StartedAtEpochMS: optionalDecimal(s.StartedAt),
		CompletedAtEpochMS: optionalDecimal(s.CompletedAt),
	}
}
