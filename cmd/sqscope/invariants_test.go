package main

import (
	"encoding/json"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
)

// decodeReport decodes a JSON report of sqscope (trace --json, report
// --json) into v, and fails t with every invariant the report breaks
// (analyzer.Snapshot.Check): every report the tests read goes through it.
func decodeReport(t testing.TB, b []byte, v any) error {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	var s analyzer.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Errorf("report as a snapshot: %v", err)
		return nil
	}
	analyzertest.Check(t, s)
	return nil
}
