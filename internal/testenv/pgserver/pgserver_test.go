package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartQueryStop(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{})
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	dsn, err := s.CreateDatabase(ctx, "Test Start/Query")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var db, user string
	if err := c.QueryRow(ctx, "SELECT current_database(), current_user").Scan(&db, &user); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if db != "test_start_query_1" || user != "postgres" {
		t.Errorf("connected to %s as %s", db, user)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there: %v", s.dir, err)
	}
	if _, err := pgx.Connect(ctx, dsn); err == nil {
		t.Error("the server still accepts connections after Stop")
	}
}

func TestFindBinDirHonoursTheEnvironment(t *testing.T) {
	t.Setenv("SQSWORKER_PG_BIN", t.TempDir())
	if _, err := FindBinDir(); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("FindBinDir with an empty SQSWORKER_PG_BIN = %v, want ErrNotInstalled", err)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"TestFoo/bar baz": "testfoo_bar_baz",
		"///":             "db",
		"Ölé":             "l",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// With TLS the server accepts encrypted connections; its certificate verifies against CAFile
// only.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{TLS: true})
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	base := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", s.Port)
	for _, tt := range []struct {
		query string
		ok    bool
	}{
		{"sslmode=require", true},
		{"sslmode=verify-full", false}, // the system's roots do not know the CA
		{"sslmode=verify-full&sslrootcert=" + s.CAFile, true},
	} {
		c, err := pgx.Connect(ctx, base+"?"+tt.query)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.query, err, tt.ok)
		}
		if err != nil {
			continue
		}
		var ssl bool
		if err := c.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
			t.Errorf("%s: ssl %v, %v", tt.query, ssl, err)
		}
		c.Close(ctx)
	}
}
