// Command dbos-agent is the per-host DBOS agent and its operator CLI.
//
// Each subcommand parses its flags and hands over to the packages that do
// the work (sysdb, agent); nothing here knows SQL.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		// One line, never a password: URLs in driver errors are redacted.
		fmt.Fprintln(os.Stderr, "dbos-agent: "+sysdb.Redact(err.Error()))
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "dbos-agent",
		Short:         "Durable DBOS workflows for any language, served by a per-host agent",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `dbos-agent version` prints.
		Version: version,
	}
	root.SetVersionTemplate(versionLine())
	root.SetGlobalNormalizationFunc(officialSpelling)
	root.AddCommand(newServeCommand(), newMigrateCommand(), newResetCommand(), newWorkflowCommand(), newQueueCommand(),
		newScheduleCommand(), newVersionCommand(), serveCommand(true))
	return root
}

func newVersionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the agent's version; list and promote application versions",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprint(cmd.OutOrStdout(), versionLine())
		},
	}
	cmd.AddCommand(newVersionListCommand(), newVersionPromoteCommand())
	return cmd
}

// versionLine is the agent's build version (stamped by make with -ldflags
// "-X main.version=...") and the system schema it migrates to.
func versionLine() string {
	return fmt.Sprintf("dbos-agent %s (system schema %d)\n", version, sysdb.LatestSchemaVersion)
}
