package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retry defaults.
const (
	DefaultMaxRetries = 3
	MaxRetryWait      = 60 * time.Second
	maxReplyBytes     = 8 << 20
)

// transport is the shared HTTP part of the real clients: JSON POST with
// retries on 429 and 5xx, honouring Retry-After.
type transport struct {
	provider   string
	http       *http.Client
	maxRetries int
	sleep      func(ctx context.Context, d time.Duration) error
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// post sends body to url with headers and returns the 2xx body, retrying
// retryable statuses. A non-retryable or final error status is decoded by
// decodeErr into an *APIError.
func (t *transport) post(ctx context.Context, url string, headers map[string]string, body any, decodeErr func(status int, b []byte) *APIError) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	hc := t.http
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Minute}
	}
	sleep := t.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.provider, err)
		}
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
		resp.Body.Close()
		if rerr != nil {
			return nil, fmt.Errorf("%s: read reply: %w", t.provider, rerr)
		}
		if resp.StatusCode/100 == 2 {
			return b, nil
		}
		if retryable(resp.StatusCode) && attempt < t.maxRetries {
			if err := sleep(ctx, retryWait(resp.Header.Get("Retry-After"), attempt)); err != nil {
				return nil, err
			}
			continue
		}
		return nil, decodeErr(resp.StatusCode, b)
	}
}

func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, 529:
		return true
	}
	return false
}

// retryWait reads Retry-After (seconds or an HTTP date), else backs off
// exponentially from 1 s; the wait is capped at MaxRetryWait.
func retryWait(header string, attempt int) time.Duration {
	d := time.Second << attempt
	if s, err := strconv.Atoi(header); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(header); err == nil {
		d = max(time.Until(t), 0)
	}
	return min(d, MaxRetryWait)
}

// providerError turns an error answer from a model provider into an
// *APIError. OpenAI-compatible servers and Anthropic both answer
// {"error": {"type", "message"}}; anything else is kept as raw text.
func providerError(provider string, status int, b []byte) *APIError {
	e := &APIError{Provider: provider, Status: status, Message: strings.TrimSpace(string(b))}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
		e.Message, e.Type = body.Error.Message, body.Error.Type
	}
	if len(e.Message) > 2000 {
		e.Message = e.Message[:2000]
	}
	return e
}

// errorsFrom returns the error parser of one provider.
func errorsFrom(provider string) func(int, []byte) *APIError {
	return func(status int, b []byte) *APIError { return providerError(provider, status, b) }
}
