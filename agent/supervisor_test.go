package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSupervisorStopsWhatItStartedAndNothingAfter(t *testing.T) {
	t.Parallel()
	sup := newSupervisor()
	ready := make(chan struct{}, 8)
	for range 8 {
		require.True(t, sup.goCtx("worker", func(ctx context.Context) {
			ready <- struct{}{}
			<-ctx.Done()
		}))
	}
	for range 8 {
		<-ready
	}
	require.Equal(t, map[string]int{"worker": 8}, sup.snapshot())
	require.Empty(t, sup.stop(5*time.Second), "every goroutine honours its context")
	require.Empty(t, sup.snapshot())
	require.False(t, sup.goFn("late", func() { t.Error("started after stop") }))
}

func TestSupervisorNamesWhatOutlivesItsDeadline(t *testing.T) {
	t.Parallel()
	sup := newSupervisor()
	release := make(chan struct{})
	started := make(chan struct{})
	require.True(t, sup.goFn("stubborn", func() {
		close(started)
		<-release // ignores the context
	}))
	<-started
	left := sup.stop(50 * time.Millisecond)
	require.Equal(t, []string{"stubborn×1"}, left)
	close(release)
	require.Empty(t, sup.stop(5*time.Second), "a second stop waits for it to end")
}

// TestSupervisorStress starts and ends goroutines from many goroutines while
// it stops: nothing started is left running, and nothing starts after.
func TestSupervisorStress(t *testing.T) {
	t.Parallel()
	for range 20 {
		sup := newSupervisor()
		var starters sync.WaitGroup
		for range 8 {
			starters.Add(1)
			go func() {
				defer starters.Done()
				for range 200 {
					if !sup.goCtx("short", func(ctx context.Context) {
						select {
						case <-ctx.Done():
						case <-time.After(time.Microsecond):
						}
					}) {
						return
					}
				}
			}()
		}
		require.Empty(t, sup.stop(10*time.Second))
		starters.Wait()
		require.Empty(t, sup.snapshot())
	}
}
