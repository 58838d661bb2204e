import type { AuditEvent, Policy, PolicyOptions, Sandbox } from 'sandgate'

/** open-multi-agent's options for one shell command. */
export interface ShellExecOptions {
  readonly cwd?: string
  readonly timeoutMs: number
  readonly abortSignal?: AbortSignal
}

/** open-multi-agent's result of one shell command. */
export interface ShellExecResult {
  readonly stdout: string
  readonly stderr: string
  /** 124 on timeout, 130 on abort, 127 when the command could not start or was refused. */
  readonly exitCode: number
}

/** open-multi-agent's `ShellExecutor`, run by sandgate's confined executor. */
export declare class SandgateShellExecutor {
  constructor(policyOrOptions?: Policy | PolicyOptions, baseDir?: string)
  start(): Promise<void>
  exec(command: string, options: ShellExecOptions): Promise<ShellExecResult>
  dispose(): Promise<void>
}

/** What an open-multi-agent tool's `execute` resolves. */
export interface ToolResult {
  readonly data: string
  readonly isError: boolean
}

/**
 * One of open-multi-agent's file tools (`ToolDefinition` there): register
 * it with `ToolRegistry.register`. `inputSchema` is a zod object schema.
 */
export interface SandgateFileTool {
  readonly name: 'file_read' | 'file_write' | 'file_edit' | 'glob' | 'grep'
  readonly description: string
  readonly inputSchema: import('zod').ZodTypeAny
  readonly consequential?: boolean
  execute(input: Record<string, unknown>, context?: unknown): Promise<ToolResult>
}

/** The five tools, and the one sandbox they share. */
export interface SandgateFileTools extends Array<SandgateFileTool> {
  readonly sandbox: Sandbox
  /** Errors the `audit` callback threw (the first 100), each also a process warning. */
  readonly auditErrors: unknown[]
}

/** Options of `createSandgateFileTools` besides the policy. */
export interface FileToolsOptions {
  /** Resolves relative roots in policy options. */
  baseDir?: string
  /** Receives every file operation's audit event, refused ones too; a throw is caught (see `auditErrors`). */
  audit?: (event: AuditEvent) => void
}

/**
 * open-multi-agent's `file_read`, `file_write`, `file_edit`, `glob` and
 * `grep` over one sandgate Sandbox (policy keys with `allow_overwrite`
 * defaulting to true, a `Policy`, or a `Sandbox`).
 */
export declare function createSandgateFileTools(
  source?: PolicyOptions | Policy | Sandbox,
  options?: FileToolsOptions,
): SandgateFileTools
