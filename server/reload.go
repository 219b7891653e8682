package server

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// OnReload registers fn to run on every Reload (SIGHUP), after the TLS
// certificates are re-read: the one reload hook every part of the server
// shares. A hook's error is logged and returned by Reload; the others
// still run.
func (s *Server) OnReload(name string, fn func() error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.reloadHooks = append(s.reloadHooks, reloadHook{name, fn})
}

type reloadHook struct {
	name string
	fn   func() error
}

func (s *Server) runReloadHooks() error {
	s.reloadMu.Lock()
	hooks := append([]reloadHook(nil), s.reloadHooks...)
	s.reloadMu.Unlock()
	var errs []error
	for _, h := range hooks {
		if err := h.fn(); err != nil {
			s.log.Error("reload failed", "what", h.name, "error", err)
			errs = append(errs, fmt.Errorf("%s: %w", h.name, err))
		}
	}
	return errors.Join(errs...)
}

// reloadLogLevel re-reads --log-level-file (one word: trace, debug, info,
// warn or error) and sets the level of every logger of the node.
func (s *Server) reloadLogLevel() error {
	b, err := os.ReadFile(s.cfg.LogLevelFile)
	if err != nil {
		return err
	}
	word := strings.ToLower(strings.TrimSpace(string(b)))
	lvl := hclog.LevelFromString(word)
	if lvl == hclog.NoLevel || word == "off" {
		return fmt.Errorf("%s: want trace, debug, info, warn or error, got %q", s.cfg.LogLevelFile, word)
	}
	s.log.SetLevel(lvl)
	s.log.Info("log level set", "level", word, "from", s.cfg.LogLevelFile)
	return nil
}
