package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

func newMigrateCommand() *cobra.Command {
	var db databaseFlags
	var applicationRole string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the DBOS system database and print its schema version",
		Long: "Creates the database and the DBOS system schema when missing and brings it to the\n" +
			"cross-SDK schema version this agent targets. A database at that version or newer\n" +
			"(migrated by any DBOS SDK) is left as it is. With --app-role, the role is\n" +
			"granted the use of the schema's tables, sequences and functions (and of those\n" +
			"created later), so the agent can then run as that less privileged role.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := db.resolve()
			if err != nil {
				return err
			}
			if t, err := sysdb.ParseTarget(target.url); err == nil && t.Kind == sysdb.KindSQLite {
				if applicationRole != "" {
					return fmt.Errorf("--app-role grants a Postgres role; a SQLite file has none")
				}
				return migrateSQLite(cmd, t.Path)
			}
			schema := target.schema
			res, err := sysdb.Migrate(cmd.Context(), target.url, sysdb.MigrateOptions{
				Schema: schema, Password: target.password, ApplicationRole: applicationRole,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case res.From == res.To:
				fmt.Fprintf(out, "system schema %q is at version %d (up to date)\n", schema, res.To)
			case res.From == 0:
				fmt.Fprintf(out, "system schema %q created at version %d\n", schema, res.To)
			default:
				fmt.Fprintf(out, "system schema %q migrated from version %d to %d\n", schema, res.From, res.To)
			}
			if applicationRole != "" {
				fmt.Fprintf(out, "role %q granted the system schema %q\n", applicationRole, schema)
			}
			return nil
		},
	}
	db.register(cmd)
	cmd.Flags().StringVarP(&applicationRole, "app-role", "r", "", "the `role` to grant the use of the system schema, the one the agent then runs as (dbos migrate's --app-role)")
	return cmd
}

// migrateSQLite creates or upgrades the SQLite file and says its version.
func migrateSQLite(cmd *cobra.Command, path string) error {
	db, err := sysdb.OpenSQLite(cmd.Context(), path, sysdb.SQLiteOptions{})
	if err != nil {
		return err
	}
	db.Close()
	fmt.Fprintf(cmd.OutOrStdout(), "SQLite system database %s is at version %d\n", path, sysdb.LatestSchemaVersion)
	return nil
}

func newResetCommand() *cobra.Command {
	var db databaseFlags
	var truncate, yes bool
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Destroy the DBOS system database, or empty its tables (for tests)",
		Long: "Drops the system database, or with --truncate empties every table of its schema and\n" +
			"keeps the schema and its migration record, as DBOS's reset_system_database does.\n" +
			"Other sessions on the database are ended first. Destructive: for test environments\n" +
			"only, and only with --yes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := db.resolve()
			if err != nil {
				return err
			}
			if !yes {
				return fmt.Errorf("reset destroys every workflow in the system database; pass --yes to do it")
			}
			if err := sysdb.Reset(cmd.Context(), target.url, sysdb.ResetOptions{
				Schema: target.schema, Truncate: truncate, Password: target.password,
			}); err != nil {
				return err
			}
			if truncate {
				fmt.Fprintf(cmd.OutOrStdout(), "system schema %q emptied\n", target.schema)
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "system database dropped")
			}
			return nil
		},
	}
	db.register(cmd)
	cmd.Flags().BoolVar(&truncate, "truncate", false, "empty the tables and keep the database and schema (faster than dropping)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "confirm the destruction")
	return cmd
}
