package agent

import (
	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// handleRenameApplication re-owns rows, as DBOS's
// DBOSClient.rename_application does (the request's names were checked by
// RenameApplication.Validate). Ownership routes dequeues, recovery and
// schedule ticks, so afterwards every poller looks again and the scheduler
// re-reads the schedules: work that changed hands is taken by its new
// owner's workers now rather than at their next interval.
func handleRenameApplication(s *Session, env protocol.Envelope) (any, *protocol.Error) {
	var m protocol.RenameApplication
	if perr := decode(env, &m); perr != nil {
		return nil, perr
	}
	moved, err := s.agent.db.ApplicationRename(s.ctx, sysdb.ApplicationRenameParams{
		OldName: optional(m.OldName), NewName: m.NewName, AdoptUnclaimed: m.AdoptUnclaimedRows, BatchSize: m.BatchSize,
	})
	if err != nil {
		return nil, protocolError(s, env.Op, err)
	}
	s.agent.wakeAllPollers()
	s.agent.schedules.reconcileSoon()
	s.log.Info("renamed application", zap.String("old_name", m.OldName), zap.String("new_name", m.NewName),
		zap.Bool("adopt_unclaimed_rows", m.AdoptUnclaimedRows), zap.Int64("workflows", moved.Workflows))
	return &protocol.RenameApplicationReply{
		Queues: moved.Queues, Schedules: moved.Schedules, Versions: moved.Versions, Workflows: moved.Workflows, Steps: moved.Steps,
	}, nil
}
