package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// defaultDatabaseHelp says what no URL means: a SQLite file in the user's
// data directory, so that the agent runs with nothing installed.
const defaultDatabaseHelp = "a SQLite file in the user's data directory, sqlite:///$XDG_DATA_HOME/dbos-agent/dbos.sqlite"

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
	// defaulted: no URL was given, url is the default SQLite file's.
	defaulted bool
	// sqlite: url names a SQLite file, which has no schemas.
	sqlite bool
}

const passwordHelp = "file holding the database password, which then need not be in the URL " +
	"(env DBOS_SYSTEM_DATABASE_PASSWORD_FILE, or the password itself in DBOS_SYSTEM_DATABASE_PASSWORD; " +
	"without either, the URL's password, else libpq's PGPASSWORD and PGPASSFILE)"

func (f *databaseFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.url, "database-url", "s", "",
		"system database URL: postgres://user:password@host:port/database, or sqlite:///relative/file or sqlite:////absolute/file "+
			"(env DBOS_SYSTEM_DATABASE_URL; default "+defaultDatabaseHelp+")")
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
		url:    firstNonEmpty(f.url, os.Getenv("DBOS_SYSTEM_DATABASE_URL"), defaults.url),
		schema: firstNonEmpty(f.schema, os.Getenv("DBOS_SYSTEM_DATABASE_SCHEMA"), defaults.schema, sysdb.DefaultSchema),
	}
	if db.url == "" {
		path, err := sysdb.DefaultSQLitePath()
		if err != nil {
			return database{}, err
		}
		db.url, db.defaulted = sysdb.SQLiteURL(path), true
	}
	target, err := sysdb.ParseTarget(db.url)
	if err != nil {
		return database{}, err
	}
	// A SQLite file has no schemas: a schema given is ignored, as DBOS
	// ignores dbos_system_schema for a sqlite:// URL.
	db.sqlite = target.Kind == sysdb.KindSQLite
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
