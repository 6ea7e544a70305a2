/**
 * What the application declared: workflow and step functions (free
 * functions, static and instance methods), the classes they belong to and
 * their configured instances. Names follow DBOS TypeScript, so the rows a
 * workflow writes carry the same `name`, `class_name` and `config_name` as
 * DBOS TypeScript's for the same code: a function's name (or the configured
 * one), its class's name (or DBOS.className's), "" for a free function.
 */
import { DBOSConflictingRegistrationError, DBOSNotRegisteredError } from './error';
import type { StepConfig, WorkflowConfig } from './types';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyFn = (...args: any[]) => any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyCtor = abstract new (...args: any[]) => any;

export class FunctionRegistration {
  /** Set for workflows. */
  workflowConfig?: WorkflowConfig;
  /** Set for steps. */
  stepConfig?: StepConfig;
  /** What integrations (event receivers) attached to this function, by the integration. */
  readonly externalRegInfo = new Map<unknown, object>();
  /** The function DBOS calls it through (the workflow's or step's wrapper), once registered. */
  registeredFunction?: AnyFn;

  constructor(
    readonly name: string,
    /** The function the application wrote. */
    readonly original: AnyFn,
    /** The class it is a method of (static: the constructor; instance: its prototype's). */
    readonly ctor: AnyCtor | undefined,
    /** An instance method: called on a ConfiguredInstance. */
    readonly isInstance: boolean,
    /** A class name given at registration (registerWorkflow's className). */
    private readonly explicitClassName: string | undefined,
  ) {}

  get className(): string {
    if (this.explicitClassName !== undefined) return this.explicitClassName;
    if (!this.ctor) return '';
    return classNames.get(this.ctor) ?? this.ctor.name;
  }
}

const byFunction = new WeakMap<AnyFn, FunctionRegistration>();
/** Every workflow declared, in order. */
const workflows = new Set<FunctionRegistration>();
const classNames = new Map<AnyCtor, string>();
const instances = new Map<string, Map<string, object>>();
/** (class name, name) -> workflow; rebuilt when a declaration or a class's name changes it. */
let index: Map<string, FunctionRegistration> | undefined;
let onWorkflowDeclared: ((reg: FunctionRegistration) => void) | undefined;

function key(className: string, name: string): string {
  return `${className}\u0000${name}`;
}

export function registrationOf(fn: unknown): FunctionRegistration | undefined {
  return typeof fn === 'function' ? byFunction.get(fn as AnyFn) : undefined;
}

export function bindWrapper(wrapper: AnyFn, reg: FunctionRegistration): void {
  reg.registeredFunction = wrapper;
  byFunction.set(wrapper, reg);
  byFunction.set(reg.original, reg);
  Object.defineProperty(wrapper, 'name', { value: reg.name });
}

export function declareWorkflow(reg: FunctionRegistration): void {
  const existing = findWorkflow(reg.className, reg.name);
  // Declaring the same code again (a module loaded twice, a function that
  // declares at every call) is harmless; another function under the name is not.
  if (existing && existing !== reg && existing.original.toString() !== reg.original.toString()) {
    throw new DBOSConflictingRegistrationError(`Operation (Name: ${reg.className}.${reg.name}) is already registered.`);
  }
  if (existing) workflows.delete(existing);
  workflows.add(reg);
  index = undefined;
  onWorkflowDeclared?.(reg);
}

/** DBOS.className: the name a class's workflows and steps are stored under. */
export function nameClass(ctor: AnyCtor, name: string): void {
  const prior = classNames.get(ctor);
  if (prior !== undefined && prior !== name) {
    throw new TypeError(`Attempt to register class under two names: ${prior} vs. ${name}`);
  }
  classNames.set(ctor, name);
  index = undefined;
}

export function findWorkflow(className: string, name: string): FunctionRegistration | undefined {
  if (!index) {
    index = new Map();
    for (const reg of workflows) index.set(key(reg.className, reg.name), reg);
  }
  return index.get(key(className, name));
}

export function allWorkflows(): FunctionRegistration[] {
  return [...workflows];
}

export function setWorkflowDeclaredHook(hook: ((reg: FunctionRegistration) => void) | undefined): void {
  onWorkflowDeclared = hook;
}

export function registerInstance(inst: object, className: string, configName: string): void {
  let byName = instances.get(className);
  if (!byName) {
    byName = new Map();
    instances.set(className, byName);
  }
  if (byName.has(configName)) {
    throw new DBOSConflictingRegistrationError(
      `An instance of class '${className}' with name '${configName}' was already registered.`,
    );
  }
  byName.set(configName, inst);
}

export function findInstance(className: string, configName: string): object | undefined {
  return instances.get(className)?.get(configName);
}

export function allInstances(): object[] {
  return [...instances.values()].flatMap((m) => [...m.values()]);
}

export function classNameOf(ctor: AnyCtor): string {
  return classNames.get(ctor) ?? ctor.name;
}

export function requireWorkflow(className: string, name: string): FunctionRegistration {
  const reg = findWorkflow(className, name);
  if (!reg) {
    throw new DBOSNotRegisteredError(name, `Workflow function ${className ? className + '.' : ''}${name} is not registered`);
  }
  return reg;
}

// ---- integrations: information event receivers attach to classes and functions ----

/** Every function an integration attached information to, and the class info, by class name. */
const externalFunctions = new Set<FunctionRegistration>();
const classInfo = new Map<string, Map<unknown, object>>();

function classKey(cls: AnyCtor | object | string): string {
  if (typeof cls === 'string') return cls;
  if (typeof cls === 'function') return classNameOf(cls as AnyCtor);
  return classNameOf((cls as object).constructor as AnyCtor);
}

/** DBOS.associateClassWithInfo: the (mutable) information of an integration for a class. */
export function classInfoFor(external: unknown, cls: AnyCtor | object | string): object {
  const k = classKey(cls);
  let m = classInfo.get(k);
  if (!m) classInfo.set(k, (m = new Map()));
  let info = m.get(external);
  if (!info) m.set(external, (info = {}));
  return info;
}

/** DBOS.associateFunctionWithInfo: the registration of func (made if need be) and its information for external. */
export function functionInfoFor(
  external: unknown,
  func: AnyFn,
  target: { name?: string; className?: string; ctorOrProto?: object },
): { registration: FunctionRegistration; regInfo: object } {
  let registration = registrationOf(func);
  if (!registration) {
    const t = target.ctorOrProto;
    const isStatic = typeof t === 'function';
    const ctor = t ? ((isStatic ? t : (t as object).constructor) as AnyCtor) : undefined;
    registration = new FunctionRegistration(target.name ?? func.name, func, ctor, t !== undefined && !isStatic, target.className);
    byFunction.set(func, registration);
  }
  externalFunctions.add(registration);
  let regInfo = registration.externalRegInfo.get(external);
  if (!regInfo) registration.externalRegInfo.set(external, (regInfo = {}));
  return { registration, regInfo };
}

/** DBOS.getAssociatedInfo: what external attached, to one function, one class's, or all. */
export function externalInfo(
  external: unknown,
  cls?: AnyCtor | object | string,
  funcName?: string,
): Array<{ methodReg: FunctionRegistration; methodConfig?: object; classConfig?: object }> {
  const out: Array<{ methodReg: FunctionRegistration; methodConfig?: object; classConfig?: object }> = [];
  const wantClass = cls === undefined ? undefined : classKey(cls);
  const regs = new Set([...externalFunctions, ...workflows]);
  for (const reg of regs) {
    if (wantClass !== undefined && reg.className !== wantClass) continue;
    if (funcName !== undefined && reg.name !== funcName) continue;
    const methodConfig = reg.externalRegInfo.get(external);
    const classConfig = classInfo.get(reg.className)?.get(external);
    if (!methodConfig && !classConfig) continue;
    out.push({ methodReg: reg, methodConfig, classConfig: classConfig ?? {} });
  }
  return out;
}

/** DBOS's clearRegistry, for tests that declare anew. */
export function clearRegistry(): void {
  workflows.clear();
  classNames.clear();
  instances.clear();
  externalFunctions.clear();
  classInfo.clear();
  index = undefined;
}
