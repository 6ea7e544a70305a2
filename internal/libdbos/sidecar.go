package libdbos

type sidecarChild struct{}

func (c *sidecarChild) stop() {}

func (l *Library) openSidecar(cfg Config) (conn, error) {
	return nil, errorf(ErrUnavailable, "mode sidecar is not built yet")
}
