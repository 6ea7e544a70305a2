/**
 * What carries the protocol's frames: the agent's Unix socket, or a handle
 * of libdbos.so. Both give a FrameStream of bytes that are whole frames
 * concatenated (each a 4-byte big-endian length and a msgpack body); the
 * connection above splits, multiplexes and reconnects, written once for both.
 */
export interface FrameStream {
  /** Queues bytes holding one or more whole frames; never blocks the event loop. */
  write(frames: Uint8Array): void;
  /**
   * Installs the receiver of incoming bytes (any split: a chunk may hold part
   * of a frame or many frames) and of the end of the stream (err: why, when
   * it did not end by close()). Called once, before any data can arrive.
   */
  start(onData: (chunk: Uint8Array) => void, onEnd: (err?: Error) => void): void;
  /** Ends the stream; onEnd is called once, and nothing after it. */
  close(): void;
}

/** Where the agent is: opens a stream to it. */
export interface Endpoint {
  /** For messages: "the dbos-agent at /run/user/1000/dbos-agent.sock". */
  describe(): string;
  /** Opens a stream; rejects with a DBOSAgentUnavailableError (or an untrusted-peer error). */
  open(): Promise<FrameStream>;
}
