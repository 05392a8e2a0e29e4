/** Every destructive action asks first; `typed` demands the user type a name back. */
export function confirmed(question: string, typed?: string): boolean {
  if (typed === undefined) return window.confirm(question);
  return window.prompt(`${question}\n\nType "${typed}" to confirm.`) === typed;
}
