// The same classes declared with a DBOS given as an argument: the binding's in
// the test, the official SDK's in a child process (test/apps/official-classes.ts),
// so the rows each writes for the same code can be compared.
/* eslint-disable @typescript-eslint/no-explicit-any */

export function defineShapes(D: any, CI: any) {
  class StaticOps {
    @D.workflow()
    static async wf(x: number): Promise<number> {
      return StaticOps.st(x);
    }

    @D.step()
    static async st(x: number): Promise<number> {
      return x + 1;
    }
  }

  @D.className('RenamedOps')
  class Renamable {
    @D.workflow()
    static async wf(x: number): Promise<number> {
      return Renamable.st(x);
    }

    @D.step()
    static async st(x: number): Promise<number> {
      return x * 2;
    }
  }

  class Account extends CI {
    constructor(name: string) {
      super(name);
    }

    @D.workflow()
    async wf(x: number): Promise<string> {
      return `${(this as any).name}:${await this.st(x)}`;
    }

    @D.step()
    async st(x: number): Promise<number> {
      return x + 3;
    }
  }

  @D.className('RenamedAccount')
  class RenamedAccount extends CI {
    constructor(name: string) {
      super(name);
    }

    @D.workflow()
    async wf(x: number): Promise<string> {
      return `${(this as any).name}/${x}`;
    }
  }

  const free = D.registerWorkflow(async (x: number) => x, { name: 'freeShape' });
  const freeWithClass = D.registerWorkflow(async (x: number) => x, { name: 'freeWithClass', className: 'GivenClass' });
  return {
    StaticOps,
    Renamable,
    account: new Account('acct-one'),
    renamedAccount: new RenamedAccount('acct-two'),
    free,
    freeWithClass,
  };
}

export type Shapes = ReturnType<typeof defineShapes>;

/** Runs every shape under ids `<prefix>-<shape>`; gives their results. */
export async function runShapes(D: any, s: Shapes, prefix: string): Promise<Record<string, unknown>> {
  const started = async (h: Promise<{ getResult(): Promise<unknown> }>) => (await h).getResult();
  return {
    static: await started(D.startWorkflow(s.StaticOps, { workflowID: `${prefix}-static` }).wf(1)),
    renamed: await started(D.startWorkflow(s.Renamable, { workflowID: `${prefix}-renamed` }).wf(2)),
    instance: await started(D.startWorkflow(s.account, { workflowID: `${prefix}-instance` }).wf(3)),
    direct: await D.withNextWorkflowID(`${prefix}-direct`, () => s.account.wf(4)),
    renamedInstance: await started(D.startWorkflow(s.renamedAccount, { workflowID: `${prefix}-renamedInstance` }).wf(5)),
    staticDirect: await D.withNextWorkflowID(`${prefix}-staticDirect`, () => s.StaticOps.wf(6)),
    free: await started(D.startWorkflow(s.free, { workflowID: `${prefix}-free` })(7)),
    freeWithClass: await started(D.startWorkflow(s.freeWithClass, { workflowID: `${prefix}-freeWithClass` })(8)),
  };
}
