package hosting

import (
	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
)

// NotifyReady tells systemd (a Type=notify unit, which sets $NOTIFY_SOCKET)
// that the agent is up: the database is open and migrated and the socket
// listens, so units ordered after it start only once applications can
// connect. Without $NOTIFY_SOCKET it does nothing. go-systemd's daemon
// package is systemd's own protocol as CoreOS keeps it (abstract sockets,
// credentials), rather than a hand-rolled datagram.
func NotifyReady(log *zap.Logger) {
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		// The agent serves either way; only the unit's start is delayed
		// until its timeout, which this line explains.
		log.Warn("could not tell systemd the agent is ready (NOTIFY_SOCKET)", zap.Error(err))
	}
}

// NotifyStopping tells systemd the agent is draining, so that `systemctl
// status` says so during the grace period.
func NotifyStopping() { _, _ = daemon.SdNotify(false, daemon.SdNotifyStopping) }
