// TEMPORARY (not committed): socket-only stand-in until the transport branch lands.
import * as net from 'node:net';
import type { Endpoint, FrameStream } from './stream';
export function resolveEndpoint(cfg: { agentSocket?: string; [k: string]: unknown }): Endpoint {
  const path = cfg.agentSocket ?? process.env.DBOS_AGENT_SOCKET ?? `/tmp/dbos-agent-${process.getuid!()}/agent.sock`;
  return {
    describe: () => path,
    open: () => new Promise<FrameStream>((resolve, reject) => {
      const s = net.createConnection({ path });
      s.once('error', reject);
      s.once('connect', () => {
        s.off('error', reject);
        resolve({
          write: (b) => { s.write(b); },
          start: (onData, onEnd) => { s.on('data', onData); s.on('error', (e) => onEnd(e)); s.on('close', () => onEnd()); },
          close: () => s.destroy(),
        });
      });
    }),
  };
}
