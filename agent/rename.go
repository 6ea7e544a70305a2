package agent

import (
	"github.com/dbos-agent/dbos-agent/protocol"
)

// handleRenameApplication re-owns rows (the request's names were checked by
// RenameApplication.Validate).
func handleRenameApplication(s *Session, env protocol.Envelope) (any, error) {
	var m protocol.RenameApplication
	if err := decode(env, &m); err != nil {
		return nil, err
	}
	moved, err := s.agent.RenameApplication(s.ctx, RenameParams{
		OldName: m.OldName, NewName: m.NewName, AdoptUnclaimedRows: m.AdoptUnclaimedRows, BatchSize: m.BatchSize,
	})
	if err != nil {
		return nil, err
	}
	return &protocol.RenameApplicationReply{
		Queues: moved.Queues, Schedules: moved.Schedules, Versions: moved.Versions, Workflows: moved.Workflows, Steps: moved.Steps,
	}, nil
}
