package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/agent"
)

// appVersionView is how an application version is shown.
type appVersionView struct {
	VersionID       string `json:"version_id"`
	VersionName     string `json:"version_name"`
	VersionTime     string `json:"version_timestamp"`
	CreatedAt       string `json:"created_at"`
	ApplicationName string `json:"application_name,omitempty"`
	// Latest marks the version whose workers take unversioned work (the
	// newest timestamp in the listing's scope).
	Latest bool `json:"latest"`
}

func newVersionListCommand() *cobra.Command {
	var db databaseFlags
	var asJSON bool
	var appName string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List application versions, the latest first",
		Args:  cobra.NoArgs,
		RunE: db.withEngine(func(cmd *cobra.Command, _ []string, engine *agent.Agent) error {
			versions, err := engine.ListVersions(cmd.Context(), agent.Caller{App: appName})
			if err != nil {
				return err
			}
			views := make([]appVersionView, len(versions))
			for i, v := range versions {
				views[i] = appVersionView{VersionID: v.ID, VersionName: v.Name, VersionTime: epochMS(v.Timestamp),
					CreatedAt: epochMS(v.CreatedAt), ApplicationName: derefOr(v.ApplicationName), Latest: i == 0}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, views)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tAPPLICATION\tTIMESTAMP\tCREATED\tLATEST")
			for _, v := range views {
				latest := ""
				if v.Latest {
					latest = "yes"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.VersionName, dash(v.ApplicationName), v.VersionTime, v.CreatedAt, latest)
			}
			return tw.Flush()
		}),
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&appName, "app-name", "", "only this application's versions (and unclaimed ones)")
	return cmd
}

func newVersionPromoteCommand() *cobra.Command {
	var db databaseFlags
	var appName string
	cmd := &cobra.Command{
		Use:   "promote NAME",
		Short: "Make an application version the latest (roll forward or back): its workers take unversioned work",
		Args:  cobra.ExactArgs(1),
		RunE: db.withEngine(func(cmd *cobra.Command, args []string, engine *agent.Agent) error {
			err := engine.PromoteVersion(cmd.Context(), agent.Caller{}, agent.PromoteVersionParams{VersionName: args[0], ApplicationName: appName})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "version %s is the latest\n", args[0])
			return nil
		}),
	}
	db.register(cmd)
	cmd.Flags().StringVar(&appName, "app-name", "", "the application whose latest version this becomes")
	return cmd
}
