package agent

// testSignals lets this package's tests wait for a background service to
// have done a round instead of sleeping for it (River's testsignal idea).
// A nil *testSignals, as in production, ignores every signal.
type testSignals struct {
	rescue chan rescueRound
}

// rescueRound is one rescuer pass: how many rows it returned to a queue.
type rescueRound struct {
	rescued int
	err     error
}

func newTestSignals() *testSignals {
	return &testSignals{rescue: make(chan rescueRound, 64)}
}

func (t *testSignals) rescued(n int, err error) {
	if t == nil {
		return
	}
	select {
	case t.rescue <- rescueRound{rescued: n, err: err}:
	default: // a test that stopped listening must not stall the service
	}
}
