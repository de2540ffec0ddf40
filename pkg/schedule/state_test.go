package schedule_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/schedule"
)

func stateSample(min int) schedule.ScheduleState {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	return schedule.ScheduleState{
		Created: t0, Expression: "rate(1 minute)", FirstSeen: t0.Add(time.Second),
		LastFired: t0.Add(time.Duration(min) * time.Minute),
	}
}

func stateCheck(t *testing.T, s schedule.StateStore, key schedule.StateKey, want schedule.ScheduleState, wantOK bool) {
	t.Helper()
	got, ok, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if ok != wantOK || ok && (!got.Created.Equal(want.Created) || !got.FirstSeen.Equal(want.FirstSeen) ||
		!got.LastFired.Equal(want.LastFired) || got.Expression != want.Expression || got.Completed != want.Completed) {
		t.Fatalf("Get(%s) = %+v, %v; want %+v, %v", key, got, ok, want, wantOK)
	}
}

func TestStateStores(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) func() schedule.StateStore{
		"memory": func(t *testing.T) func() schedule.StateStore {
			s := schedule.MemoryState()
			return func() schedule.StateStore { return s }
		},
		"file": func(t *testing.T) func() schedule.StateStore {
			path := filepath.Join(t.TempDir(), "nested", "state.json")
			return func() schedule.StateStore { return schedule.FileState(path) } // a fresh instance: a restart
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			reopen := open(t)
			a, b := schedule.StateKey{Group: "default", Name: "a"}, schedule.StateKey{Group: "other", Name: "a"}
			stateCheck(t, reopen(), a, schedule.ScheduleState{}, false)
			s := reopen()
			if err := s.Put(ctx, a, stateSample(1)); err != nil {
				t.Fatal(err)
			}
			done := stateSample(2)
			done.Completed = true
			if err := s.Put(ctx, b, done); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, a, stateSample(3)); err != nil {
				t.Fatal(err)
			}
			s = reopen()
			stateCheck(t, s, a, stateSample(3), true)
			stateCheck(t, s, b, done, true) // keyed by group and name
			if err := s.Delete(ctx, a); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, a); err != nil {
				t.Fatalf("deleting an unknown key: %v", err)
			}
			s = reopen()
			stateCheck(t, s, a, schedule.ScheduleState{}, false)
			stateCheck(t, s, b, done, true)
		})
	}
}

func TestFileStateWritesAtomically(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	s := schedule.FileState(path)
	for i := range 5 {
		if err := s.Put(context.Background(), schedule.StateKey{Group: "g", Name: "n"}, stateSample(i)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "state.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only state.json (no temporary files left)", names)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("state file mode %v, want private to its owner", fi.Mode().Perm())
	}
}

func TestFileStateErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	key := schedule.StateKey{Group: "g", Name: "n"}

	corrupt := filepath.Join(dir, "corrupt.json")
	if err := os.WriteFile(corrupt, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := schedule.FileState(corrupt).Get(ctx, key); err == nil {
		t.Error("Get on a corrupt state file: no error")
	}

	// A failed write (here: the path has become a non-empty directory, so the rename fails)
	// returns an error and leaves the state as it was.
	path := filepath.Join(dir, "state.json")
	s := schedule.FileState(path)
	if err := s.Put(ctx, key, stateSample(1)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, key, stateSample(2)); err == nil {
		t.Fatal("Put that cannot be written: no error")
	}
	stateCheck(t, s, key, stateSample(1), true)
	if matches, _ := filepath.Glob(filepath.Join(dir, ".state.json.tmp-*")); len(matches) != 0 {
		t.Errorf("temporary files left behind: %v", matches)
	}
}
