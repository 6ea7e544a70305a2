package sysdb

import (
	"context"
	"errors"
)

// Placeholder until the Postgres implementation lands (same session).
var errCommunicationPending = errors.New("sysdb: communication not implemented yet")

func (p *Postgres) MessageSend(ctx context.Context, m MessageSendParams) (bool, error) {
	return false, errCommunicationPending
}
func (p *Postgres) MessagePending(ctx context.Context, destinationID, topic string) (bool, error) {
	return false, errCommunicationPending
}
func (p *Postgres) MessageConsume(ctx context.Context, m MessageConsumeParams) (Received, error) {
	return Received{}, errCommunicationPending
}
func (p *Postgres) MessageList(ctx context.Context, destinationID string) ([]Notification, error) {
	return nil, errCommunicationPending
}
func (p *Postgres) SleepRecord(ctx context.Context, caller StepCaller, durationMS int64) (SleepTimes, error) {
	return SleepTimes{}, errCommunicationPending
}
func (p *Postgres) EventSet(ctx context.Context, e EventSetParams) error { return errCommunicationPending }
func (p *Postgres) EventGet(ctx context.Context, workflowID, key string) (*Payload, error) {
	return nil, errCommunicationPending
}
func (p *Postgres) EventList(ctx context.Context, workflowID string) ([]Event, error) {
	return nil, errCommunicationPending
}
func (p *Postgres) EventHistory(ctx context.Context, workflowID string) ([]EventHistoryEntry, error) {
	return nil, errCommunicationPending
}
func (p *Postgres) StreamWrite(ctx context.Context, s StreamWriteParams) error { return errCommunicationPending }
func (p *Postgres) StreamRead(ctx context.Context, workflowID, key string, offset, limit int) (StreamRead, error) {
	return StreamRead{}, errCommunicationPending
}
func (p *Postgres) StreamList(ctx context.Context, workflowID string) ([]StreamEntry, error) {
	return nil, errCommunicationPending
}
func (p *Postgres) StepGet(ctx context.Context, workflowID string, functionID int) (*Step, error) {
	return nil, errCommunicationPending
}
func (p *Postgres) WorkflowFork(ctx context.Context, f WorkflowForkParams) error {
	return errCommunicationPending
}
func (p *Postgres) WorkflowRewind(ctx context.Context, r WorkflowRewindParams) error {
	return errCommunicationPending
}
func (p *Postgres) WorkflowSetAttributes(ctx context.Context, workflowID string, attributes *string, merge bool) error {
	return errCommunicationPending
}
