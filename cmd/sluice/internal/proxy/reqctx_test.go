package proxy

import (
	"context"
	"testing"
	"time"
)

// The request's contexts that live in its state behave as the context
// package's they replace: a child of stateCtx ends with the client at once
// (registered with the client's cancelCtx, as under a WithValue, not
// watched by a goroutine) and sees the state, the client's values and
// deadline; the upstream's context made on detached, as on WithoutCancel,
// keeps the values, has no deadline, outlives the client, and carries its
// own cause.
func TestRequestContexts(t *testing.T) {
	type key struct{}
	deadline := time.Now().Add(time.Hour)
	client, leave := context.WithDeadline(context.WithValue(context.Background(), key{}, "v"), deadline)
	defer leave()
	st := &reqState{ctx: client}
	ctx := st.withState()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	st.detached.parent = child
	up, cancelUp := context.WithCancelCause(&st.detached)
	defer cancelUp(nil)

	for name, c := range map[string]context.Context{"request": ctx, "its child": child, "upstream": up} {
		if stateFrom(c) != st || c.Value(key{}) != "v" {
			t.Errorf("%s context: state %p (want %p), value %v", name, stateFrom(c), st, c.Value(key{}))
		}
	}
	if d, ok := child.Deadline(); !ok || !d.Equal(deadline) {
		t.Errorf("the request's deadline: %v %v, want the client's %v", d, ok, deadline)
	}
	if d, ok := up.Deadline(); ok {
		t.Errorf("the upstream context has the deadline %v", d)
	}
	leave()
	if child.Err() != context.Canceled && child.Err() != context.DeadlineExceeded {
		t.Fatalf("a child of the request's context did not end with the client: %v", child.Err())
	}
	if up.Err() != nil {
		t.Fatalf("the upstream context ended with the client: %v", up.Err())
	}
	cancelUp(errHeaderTimeout)
	if context.Cause(up) != errHeaderTimeout {
		t.Fatalf("the upstream context's cause: %v", context.Cause(up))
	}
}
