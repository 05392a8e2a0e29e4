// The project's webhooks: the list, one's deliveries, and every change (create, enable or
// disable, send a test, delete). A new webhook's secret is in the create's answer only.
import { useMutation, useQuery } from "@tanstack/react-query";
import { answer, api, type Schemas } from "./client";
import { keys, useInvalidate } from "./keys";

export type Webhook = Schemas["WebhookPublic"];
export type Delivery = Schemas["DeliveryPublic"];

export function useWebhooks() {
  return useQuery({
    queryKey: keys.webhooks,
    queryFn: () => answer(api.GET("/v1/webhooks")),
    refetchInterval: 30_000,
  });
}

/** A webhook's recent deliveries, read while they are shown; a test or a change of the
 * webhook reads them again. */
export function useDeliveries(webhookId: string) {
  return useQuery({
    queryKey: keys.deliveries(webhookId),
    queryFn: () => answer(api.GET("/v1/webhooks/{webhook_id}/deliveries", { params: { path: { webhook_id: webhookId } } })),
    refetchInterval: 5_000,
  });
}

export function useCreateWebhook() {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: (body: Schemas["WebhookCreate"]) => answer(api.POST("/v1/webhooks", { body })),
    onSuccess: () => invalidate(keys.webhooks),
  });
}

export type WebhookChange =
  | { webhook: Webhook; kind: "enable" | "disable" }
  | { webhook: Webhook; kind: "test" }
  | { webhook: Webhook; kind: "delete" };

async function change(c: WebhookChange): Promise<void> {
  const path = { params: { path: { webhook_id: c.webhook.id } } };
  switch (c.kind) {
    case "enable":
    case "disable":
      await answer(api.PATCH("/v1/webhooks/{webhook_id}", { ...path, body: { enabled: c.kind === "enable" } }));
      return;
    case "test":
      await answer(api.POST("/v1/webhooks/{webhook_id}/test", path));
      return;
    case "delete":
      await answer(api.DELETE("/v1/webhooks/{webhook_id}", path));
      return;
  }
}

export function useChangeWebhook() {
  const invalidate = useInvalidate();
  return useMutation<void, Error, WebhookChange>({
    mutationFn: change,
    onSuccess: (_done, c) => invalidate(keys.webhooks, keys.deliveries(c.webhook.id)),
  });
}
