package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
)

// defaultDatabaseURL is the local server the DBOS SDKs assume too.
const defaultDatabaseURL = "postgres://postgres:dbos@localhost:5432/dbos_agent_sys?sslmode=disable"

// databaseFlags are shared by every command that reads the system database.
type databaseFlags struct {
	url    string
	schema string
}

func (f *databaseFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "database-url", "",
		"system database URL (env DBOS_SYSTEM_DATABASE_URL; default "+defaultDatabaseURL+")")
	cmd.Flags().StringVar(&f.schema, "schema", "",
		"schema of the DBOS system tables (env DBOS_SYSTEM_DATABASE_SCHEMA; default dbos)")
}

func (f *databaseFlags) resolve() (url, schema string, err error) {
	url = firstNonEmpty(f.url, os.Getenv("DBOS_SYSTEM_DATABASE_URL"), defaultDatabaseURL)
	schema = firstNonEmpty(f.schema, os.Getenv("DBOS_SYSTEM_DATABASE_SCHEMA"), "dbos")
	if url == "" {
		return "", "", errors.New("no database URL")
	}
	return url, schema, nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
