package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// StateKey identifies a schedule in a StateStore: schedule names are unique within a group.
type StateKey struct {
	Group string
	Name  string
}

// String returns "group/name" (a group name cannot contain a slash).
func (k StateKey) String() string { return k.Group + "/" + k.Name }

// ScheduleState is what the Dispatcher remembers about one schedule.
type ScheduleState struct {
	// Created is the schedule's CreationDate: a schedule deleted and created again under the same
	// name is a new schedule and starts afresh.
	Created time.Time `json:"created"`
	// Expression is the schedule expression the state was recorded for. When UpdateSchedule
	// changes it, FirstSeen restarts (occurrences of the new expression before the change never
	// fire) and a completed one-time schedule may fire again.
	Expression string `json:"expression"`
	// FirstSeen is when the Dispatcher first saw the schedule enabled (with this expression).
	// No recurring occurrence before it is ever fired. It is zero while the schedule is
	// DISABLED, and set again when it is seen enabled, so a pause is never replayed.
	FirstSeen time.Time `json:"first_seen"`
	// LastFired is the scheduled time of the last occurrence sent; zero when none was.
	LastFired time.Time `json:"last_fired,omitzero"`
	// Completed is set once a one-time (at) schedule has fired; it never fires again, even if
	// its deletion (ActionAfterCompletion DELETE) failed and must be retried.
	Completed bool `json:"completed,omitempty"`
}

// StateStore keeps the Dispatcher's ScheduleState per schedule. The Dispatcher calls it from one
// goroutine at a time; implementations need not be shared between dispatchers.
type StateStore interface {
	// Get returns the state of key; ok is false when none is recorded.
	Get(ctx context.Context, key StateKey) (st ScheduleState, ok bool, err error)
	// Put records the state of key. When Put returns nil the state must survive whatever the
	// store promises to survive (a FileState: a process restart).
	Put(ctx context.Context, key StateKey, st ScheduleState) error
	// Delete forgets key; deleting an unknown key is not an error.
	Delete(ctx context.Context, key StateKey) error
}

// MemoryState returns a StateStore that keeps state in memory: it is lost when the process
// exits, so after a restart recurring schedules start afresh (no missed occurrence is fired)
// and a one-time schedule with ActionAfterCompletion NONE that already fired fires again. Use
// FileState to keep state across restarts.
func MemoryState() StateStore {
	return &memoryState{m: make(map[StateKey]ScheduleState)}
}

type memoryState struct {
	mu sync.Mutex
	m  map[StateKey]ScheduleState
}

func (s *memoryState) Get(_ context.Context, key StateKey) (ScheduleState, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[key]
	return st, ok, nil
}

func (s *memoryState) Put(_ context.Context, key StateKey, st ScheduleState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = st
	return nil
}

func (s *memoryState) Delete(_ context.Context, key StateKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// FileState returns a StateStore kept in the JSON file at path, so that a restarted Dispatcher
// neither fires an occurrence twice nor forgets which occurrences it missed. The file is read
// on first use (a missing file is an empty state) and rewritten whole on every change,
// atomically: a temporary file in the same directory, synced, then renamed over path, so a
// crash leaves either the old or the new state, never a torn file. One Dispatcher per file:
// two processes writing the same file would overwrite each other's changes.
func FileState(path string) StateStore {
	return &fileState{path: path}
}

type fileState struct {
	path string

	mu     sync.Mutex
	loaded bool
	m      map[string]ScheduleState
}

// fileStateDoc is the file's format.
type fileStateDoc struct {
	Version   int                      `json:"version"`
	Schedules map[string]ScheduleState `json:"schedules"`
}

const fileStateVersion = 1

func (s *fileState) load() error {
	if s.loaded {
		return nil
	}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.m = make(map[string]ScheduleState)
	case err != nil:
		return fmt.Errorf("schedule: read state: %w", err)
	default:
		var doc fileStateDoc
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("schedule: state file %s: %w", s.path, err)
		}
		if doc.Version != fileStateVersion {
			return fmt.Errorf("schedule: state file %s: unsupported version %d", s.path, doc.Version)
		}
		s.m = doc.Schedules
		if s.m == nil {
			s.m = make(map[string]ScheduleState)
		}
	}
	s.loaded = true
	return nil
}

func (s *fileState) Get(_ context.Context, key StateKey) (ScheduleState, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return ScheduleState{}, false, err
	}
	st, ok := s.m[key.String()]
	return st, ok, nil
}

func (s *fileState) Put(_ context.Context, key StateKey, st ScheduleState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	next := make(map[string]ScheduleState, len(s.m)+1)
	for k, v := range s.m {
		next[k] = v
	}
	next[key.String()] = st
	if err := s.write(next); err != nil {
		return err
	}
	s.m = next
	return nil
}

func (s *fileState) Delete(_ context.Context, key StateKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	if _, ok := s.m[key.String()]; !ok {
		return nil
	}
	next := make(map[string]ScheduleState, len(s.m))
	for k, v := range s.m {
		if k != key.String() {
			next[k] = v
		}
	}
	if err := s.write(next); err != nil {
		return err
	}
	s.m = next
	return nil
}

// write replaces the file with m atomically: temporary file, fsync, rename.
func (s *fileState) write(m map[string]ScheduleState) (err error) {
	b, err := json.MarshalIndent(fileStateDoc{Version: fileStateVersion, Schedules: m}, "", "  ")
	if err != nil {
		return fmt.Errorf("schedule: encode state: %w", err)
	}
	dir, base := filepath.Split(s.path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("schedule: write state: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+strings.TrimPrefix(base, ".")+".tmp-*")
	if err != nil {
		return fmt.Errorf("schedule: write state: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("schedule: write state: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("schedule: write state: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("schedule: write state: %w", err)
	}
	if err = os.Rename(f.Name(), s.path); err != nil {
		return fmt.Errorf("schedule: write state: %w", err)
	}
	// Make the rename itself durable where the platform allows syncing a directory.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
