package protocol

import (
	"fmt"
	"testing"
)

// benchRecordStep is a typical step record: a small JSON output.
func benchRecordStep() *RecordStep {
	return &RecordStep{WorkflowID: "order-1002", OwnerXID: exampleOwner, Step: Step{
		FunctionID: 7, Name: "reserve_stock", Output: strp(`{"reserved":true,"sku":"A-1001","qty":2}`),
		Serialization: "portable_json", StartedAtMS: exampleT0 + 1000, CompletedAtMS: exampleT0 + 1012,
	}}
}

// benchRun is a run push with a 10-step history.
func benchRun() *Run {
	r := &Run{
		WorkflowID: "order-1002", Name: "checkout", Inputs: strp(exampleInputs), Serialization: "portable_json",
		OwnerXID: exampleOwner, QueueName: "orders", RecoveryAttempts: 2,
	}
	for i := 1; i <= 10; i++ {
		r.History = append(r.History, Step{
			FunctionID: i, Name: fmt.Sprintf("step_%d", i), Output: strp(fmt.Sprintf(`{"step":%d,"ok":true}`, i)),
			Serialization: "portable_json", StartedAtMS: exampleT0 + int64(i)*10, CompletedAtMS: exampleT0 + int64(i)*10 + 5,
		})
	}
	return r
}

func BenchmarkEncodeRecordStep(b *testing.B) {
	enc := NewEncoder()
	msg := benchRecordStep()
	frame, err := enc.Request(1, OpRecordStep, msg)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := enc.Request(uint64(i), OpRecordStep, msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRecordStep(b *testing.B) {
	frame, err := NewEncoder().Request(1, OpRecordStep, benchRecordStep())
	if err != nil {
		b.Fatal(err)
	}
	body := append([]byte(nil), frame[4:]...)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		env, err := DecodeEnvelope(body)
		if err != nil {
			b.Fatal(err)
		}
		var m RecordStep
		if err := DecodeBody(env.Body, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRunPush(b *testing.B) {
	enc := NewEncoder()
	msg := benchRun()
	frame, err := enc.Push(PushRun, msg)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := enc.Push(PushRun, msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRunPush(b *testing.B) {
	frame, err := NewEncoder().Push(PushRun, benchRun())
	if err != nil {
		b.Fatal(err)
	}
	body := append([]byte(nil), frame[4:]...)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		env, err := DecodeEnvelope(body)
		if err != nil {
			b.Fatal(err)
		}
		var m Run
		if err := DecodeBody(env.Body, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckWellFormed is the cost of the pre-decoding walk alone.
func BenchmarkCheckWellFormed(b *testing.B) {
	frame, err := NewEncoder().Push(PushRun, benchRun())
	if err != nil {
		b.Fatal(err)
	}
	body := frame[4:]
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkWellFormed(body); err != nil {
			b.Fatal(err)
		}
	}
}
