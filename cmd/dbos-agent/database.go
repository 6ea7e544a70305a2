package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// defaultDatabaseURL is the local server the DBOS SDKs assume too.
const defaultDatabaseURL = "postgres://postgres:dbos@localhost:5432/dbos_agent_sys?sslmode=disable"

// databaseFlags are shared by every command that reads the system database.
type databaseFlags struct {
	url          string
	schema       string
	passwordFile string
}

// database is where the system database is and how to log in to it.
type database struct {
	url, schema string
	// password replaces the URL's when set (sysdb's Password option).
	password string
}

const passwordHelp = "file holding the database password, which then need not be in the URL " +
	"(env DBOS_SYSTEM_DATABASE_PASSWORD_FILE, or the password itself in DBOS_SYSTEM_DATABASE_PASSWORD; " +
	"without either, the URL's password, else libpq's PGPASSWORD and PGPASSFILE)"

func (f *databaseFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "database-url", "",
		"system database URL (env DBOS_SYSTEM_DATABASE_URL; default "+defaultDatabaseURL+")")
	cmd.Flags().StringVar(&f.schema, "schema", "",
		"schema of the DBOS system tables (env DBOS_SYSTEM_DATABASE_SCHEMA; default dbos)")
	cmd.Flags().StringVar(&f.passwordFile, "database-password-file", "", passwordHelp)
}

func (f *databaseFlags) resolve() (database, error) {
	return f.resolveWith(database{}, "")
}

// resolveWith resolves the flags over the environment over the defaults
// given (serve's config file), then the built-in defaults.
func (f *databaseFlags) resolveWith(defaults database, defaultPasswordFile string) (database, error) {
	db := database{
		url:    firstNonEmpty(f.url, os.Getenv("DBOS_SYSTEM_DATABASE_URL"), defaults.url, defaultDatabaseURL),
		schema: firstNonEmpty(f.schema, os.Getenv("DBOS_SYSTEM_DATABASE_SCHEMA"), defaults.schema, sysdb.DefaultSchema),
	}
	if db.url == "" {
		return database{}, errors.New("no database URL")
	}
	password, err := resolvePassword(f.passwordFile, defaultPasswordFile)
	if err != nil {
		return database{}, err
	}
	db.password = password
	return db, nil
}

// resolvePassword reads the password from the file named by the flag, else
// by DBOS_SYSTEM_DATABASE_PASSWORD_FILE, else takes
// DBOS_SYSTEM_DATABASE_PASSWORD, else reads the config file's file. ""
// leaves the URL's password (and libpq's fallbacks) in charge.
func resolvePassword(flagFile, configFile string) (string, error) {
	path := firstNonEmpty(flagFile, os.Getenv("DBOS_SYSTEM_DATABASE_PASSWORD_FILE"))
	if path == "" {
		if p := os.Getenv("DBOS_SYSTEM_DATABASE_PASSWORD"); p != "" {
			return p, nil
		}
		path = configFile
	}
	if path == "" {
		return "", nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the database password file: %w", err)
	}
	// A file written by `echo` or a secrets manager ends with a newline
	// that is not part of the password.
	password := strings.TrimRight(string(raw), "\r\n")
	if password == "" {
		return "", fmt.Errorf("the database password file %s is empty", path)
	}
	return password, nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
